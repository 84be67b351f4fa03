"""The full profile solves 4 images a batch: every image's reconstruction is the one it gets alone
(batch 1), within float32 round-off of batched convolutions: atol 1e-3 on images in [-1, 1], which the
projection's decode-encode round trip through the random tiny VAE amplifies (LDPS alone agrees to ~1e-6,
P2L with projection to ~7e-4 after 3 steps). LDPS, P2L (prompt tuning + projection) and PSLD without its
encoder posterior draws, which come per batch. Without the shared up-front z_T draw each batch drew its
own, and batch 4 differed from batch 1 by O(1)."""
from types import SimpleNamespace

import pytest
import torch

from papers.p2l import build_operator
from papers.p2l.experiments.problems import _solve_batches

from test_p2l_solver import tiny_ldm

ATOL, RTOL = 1e-3, 0.0


@pytest.fixture(scope="module")
def ldm():
    return tiny_ldm()


def cfg(batch: int):
    return SimpleNamespace(solve=SimpleNamespace(batch_size=batch, steps=3))


@pytest.mark.parametrize("method,hp", [
    ("ldps", {"rho": 1.0}),
    ("p2l", {"rho": 1.0, "prompt_lr": 0.05, "prompt_steps": 1, "projection": True, "tau": 1, "lam": 1e-4,
             "cg_iters": 5}),
    ("psld", {"rho": 1.0, "gamma_glue": 0.1, "encoder_sample": False}),
])
def test_batch_of_four_equals_one_at_a_time(ldm, method, hp):
    g = torch.Generator().manual_seed(3)
    op = build_operator("sr", 16, factor=4)
    y = op.measure(torch.rand(4, 3, 16, 16, generator=g) * 2 - 1, 0)
    one = _solve_batches(method, y, op, ldm, cfg(1), 7, None, **hp)
    four = _solve_batches(method, y, op, ldm, cfg(4), 7, None, **hp)
    torch.testing.assert_close(four[0], one[0], atol=ATOL, rtol=RTOL)
    for key in one[4]:
        torch.testing.assert_close(torch.as_tensor(four[4][key]), torch.as_tensor(one[4][key]), atol=ATOL, rtol=1e-2)
    assert not torch.allclose(one[0][0], one[0][1], atol=1e-3)   # four different problems, not one
