"""gmm_estep: Triton (interpreter on CPU, CUDA when present) against the torch reference, and the
reference against sklearn's GaussianMixture for one EM step as τ -> 0."""
import numpy as np
import pytest
import torch

from kernels.gmm_estep import gmm_estep, gmm_estep_reference
from kernels.gmm_estep.triton_kernel import gmm_estep as gmm_estep_triton


def problem(B, N, C, D, seed=0, dtype=torch.float32, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, N, D, generator=g)
    mask = torch.rand(B, N, generator=g) > 0.25
    mask[:, 0] = True
    m = torch.randn(C, D, generator=g)
    pi = torch.softmax(torch.randn(B, C, generator=g), -1)
    mu = m.expand(B, C, D) + 0.1 * torch.randn(B, C, D, generator=g)
    var = 0.3 + torch.rand(B, C, D, generator=g)
    return [t.to(device=device, dtype=dtype if t.dtype != torch.bool else t.dtype) for t in (x, mask, pi, mu, var, m)]


def rel_err(a, b):
    return ((a.double() - b.double()).abs().max() / b.double().abs().max().clamp_min(1e-12)).item()


@pytest.mark.parametrize("B,N,C,D", [(1, 16, 16, 16), (2, 77, 16, 37), (3, 130, 5, 70), (1, 33, 16, 129)])
def test_triton_matches_reference(B, N, C, D):
    args = problem(B, N, C, D)
    ref = gmm_estep_reference(*[a.double() if a.is_floating_point() else a for a in args], 1e-3, 0.1)
    out = gmm_estep_triton(*args, 1e-3, 0.1)
    for o, r in zip(out, ref):
        assert o.dtype == torch.float32 and o.shape == r.shape
        assert rel_err(o, r) < 1e-4


def test_padding_rows_are_ignored():
    x, mask, pi, mu, var, m = problem(2, 40, 16, 24)
    padded = torch.cat([x, 100 * torch.randn(2, 9, 24)], 1)
    pmask = torch.cat([mask, torch.zeros(2, 9, dtype=torch.bool)], 1)
    a = gmm_estep_triton(x, mask, pi, mu, var, m, 1e-3, 0.1)
    b = gmm_estep_triton(padded, pmask, pi, mu, var, m, 1e-3, 0.1)
    for u, v in zip(a, b):
        assert rel_err(u, v) < 1e-5


def test_reference_matches_sklearn_one_em_step():
    from sklearn.mixture import GaussianMixture

    rng = np.random.default_rng(0)
    C, D = 4, 3
    centres = rng.normal(0, 3, (C, D))
    x = np.concatenate([c + rng.normal(0, 0.7, (60, D)) for c in centres])
    means0, prec0 = centres + 0.3, np.full((C, D), 1 / 0.5)
    gm = GaussianMixture(C, covariance_type="diag", max_iter=1, reg_covar=0.0, means_init=means0,
                         precisions_init=prec0, weights_init=np.full(C, 1 / C), tol=0.0).fit(x)
    t = lambda a: torch.tensor(a, dtype=torch.float64)[None]  # noqa: E731
    pi, mu, var = gmm_estep_reference(t(x), None, t(np.full(C, 1 / C)), t(means0), t(1 / prec0),
                                      torch.tensor(means0), tau=1e-10, eps=0.1)
    # sklearn: one E-step from the init, then the M-step (its fit runs E, M once with max_iter=1)
    np.testing.assert_allclose(pi[0].numpy(), gm.weights_, rtol=1e-6)
    np.testing.assert_allclose(mu[0].numpy(), gm.means_, rtol=1e-6)
    np.testing.assert_allclose(var[0].numpy(), gm.covariances_, rtol=1e-5)


def test_dispatcher_uses_reference_for_float64(monkeypatch):
    args = problem(1, 20, 16, 16, dtype=torch.float64)
    out = gmm_estep(*args)
    assert out[0].dtype == torch.float64


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_kernel_matches_reference():
    args = problem(4, 1000, 16, 256, device="cuda")
    ref = gmm_estep_reference(*args, 1e-3, 0.1)
    for o, r in zip(gmm_estep(*args), ref):
        assert rel_err(o, r) < 1e-3
