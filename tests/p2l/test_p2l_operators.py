"""Measurement operators: the adjoint identity, and the proximal step (CG vs closed form)."""
import pytest
import torch

from papers.p2l import TASKS, build_operator
from papers.p2l.operators import Inpainting, box_mask
from papers.p2l.solver import proximal


@pytest.mark.parametrize("task", TASKS)
def test_adjoint_identity(task):
    g = torch.Generator().manual_seed(0)
    op = build_operator(task, 32, seed=3)
    x = torch.randn(2, 3, 32, 32, generator=g, dtype=torch.float64)
    y = torch.randn(op.forward(x).shape, generator=g, dtype=torch.float64)
    lhs = (op.forward(x) * y).sum()
    rhs = (x * op.adjoint(y)).sum()
    assert torch.allclose(lhs, rhs, rtol=1e-10, atol=1e-10)


def test_sr_and_blur_shapes_and_seeded_noise():
    x = torch.zeros(1, 3, 32, 32)
    assert build_operator("sr", 32, factor=8).forward(x).shape == (1, 3, 4, 4)
    op = build_operator("motion", 32, seed=1)
    assert torch.allclose(op.kernel.sum(), torch.tensor(1.0))
    assert torch.equal(op.kernel, build_operator("motion", 32, seed=1).kernel)
    assert not torch.equal(op.kernel, build_operator("motion", 32, seed=2).kernel)
    assert torch.equal(op.measure(x, 0), op.measure(x, 0))


@pytest.mark.parametrize("lam", [1e-4, 1e-2, 1.0])
def test_cg_prox_equals_inpainting_closed_form(lam):
    g = torch.Generator().manual_seed(1)
    op = Inpainting(box_mask(16, 6), "box")
    x_bar = torch.randn(2, 3, 16, 16, generator=g, dtype=torch.float64)
    y = op.forward(torch.randn(2, 3, 16, 16, generator=g, dtype=torch.float64))
    closed = proximal(y, op, x_bar, lam, closed_form=True)
    cg = proximal(y, op, x_bar, lam, cg_iters=10, closed_form=False)
    assert torch.allclose(closed, cg, atol=1e-8)


def test_cg_prox_solves_normal_equations_for_blur():
    g = torch.Generator().manual_seed(2)
    op = build_operator("gblur", 16, kernel_size=5, blur_sigma=1.0)
    x_bar = torch.randn(1, 3, 16, 16, generator=g, dtype=torch.float64)
    y = op.forward(torch.randn(1, 3, 16, 16, generator=g, dtype=torch.float64))
    lam = 0.1
    x = proximal(y, op, x_bar, lam, cg_iters=200)
    residual = op.normal(x) + lam * x - (op.adjoint(y) + lam * x_bar)
    assert residual.norm() < 1e-6 * (op.adjoint(y) + lam * x_bar).norm()
