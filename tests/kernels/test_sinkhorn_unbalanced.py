"""sinkhorn_unbalanced against POT (reg_type='entropy') and the Triton kernel against the reference."""
import numpy as np
import ot
import pytest
import torch

from kernels.sinkhorn_unbalanced import sinkhorn_unbalanced, sinkhorn_unbalanced_reference
from kernels.sinkhorn_unbalanced.triton_kernel import sinkhorn_unbalanced as sinkhorn_triton

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"   # compiled on CUDA, the interpreter on CPU


def problem(B, n, m, seed=0, scale=1.0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    M = scale * torch.rand(B, n, m, generator=g, dtype=torch.float64)
    a = torch.full((B, n), 1 / n, dtype=torch.float64)
    b = torch.full((B, m), 1 / m, dtype=torch.float64)
    return a.to(dtype), b.to(dtype), M.to(dtype)


def pot(a, b, M, **kw):
    return np.stack([ot.unbalanced.sinkhorn_knopp_unbalanced(a[i].numpy(), b[i].numpy(), M[i].numpy(), 0.1, 0.5,
                                                              reg_type="entropy", **kw) for i in range(len(M))])


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("B,n,m", [(3, 16, 50), (2, 5, 7)])
def test_reference_matches_pot_per_problem(B, n, m):
    a, b, M = problem(B, n, m)
    M[1] *= 3  # problems converge at different iterations
    np.testing.assert_allclose(sinkhorn_unbalanced_reference(a, b, M).numpy(), pot(a, b, M), rtol=1e-9, atol=1e-15)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_reference_is_differentiable_like_pot_torch_backend():
    a, b, M = problem(1, 6, 9)
    M1 = M.clone().requires_grad_(True)
    sinkhorn_unbalanced_reference(a, b, M1).sum().backward()
    M2 = M[0].clone().requires_grad_(True)
    ot.unbalanced.sinkhorn_knopp_unbalanced(a[0], b[0], M2, 0.1, 0.5, reg_type="entropy").sum().backward()
    torch.testing.assert_close(M1.grad[0], M2.grad, rtol=1e-8, atol=1e-12)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 1e-4)])
@pytest.mark.parametrize("B,n,m", [(2, 16, 50), (2, 3, 19)])
def test_triton_matches_reference(B, n, m, dtype, tol):
    a, b, M = problem(B, n, m, scale=3.0, dtype=dtype)
    ref = sinkhorn_unbalanced_reference(a.double(), b.double(), M.double(), num_iter_max=200)
    out = sinkhorn_triton(a.to(DEVICE), b.to(DEVICE), M.to(DEVICE), num_iter_max=200).cpu()
    assert out.dtype == dtype
    assert ((out.double() - ref).abs().max() / ref.abs().max()).item() < tol


def test_dispatcher_keeps_gradients():
    a, b, M = problem(2, 4, 5)
    M.requires_grad_(True)
    sinkhorn_unbalanced(a, b, M).sum().backward()
    assert M.grad is not None and torch.isfinite(M.grad).all()
