"""gmm_estep: Triton (interpreter on CPU, CUDA when present) against the torch reference, bitwise
reproducibility, offsets past 2³¹, and the reference against sklearn's GaussianMixture for one EM step
as τ -> 0."""
import numpy as np
import pytest
import torch

from kernels.gmm_estep import gmm_estep, gmm_estep_reference
from kernels.gmm_estep.triton_kernel import gmm_estep as gmm_estep_triton
from wide_offsets import past_int32

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"   # the kernel takes CUDA tensors when compiled


def problem(B, N, C, D, seed=0, dtype=torch.float32, device=DEVICE):
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


def reference64(args):
    return gmm_estep_reference(*[a.double() if a.is_floating_point() else a for a in args], 1e-3, 0.1)


# block_n sets the split: one split, several with a ragged last one, C and D not powers of two
@pytest.mark.parametrize("B,N,C,D,block_n", [(1, 16, 16, 16, 128), (2, 77, 16, 37, 32), (3, 130, 5, 70, 64),
                                             (1, 33, 16, 129, 16)])
def test_triton_matches_reference(B, N, C, D, block_n):
    args = problem(B, N, C, D)
    out = gmm_estep_triton(*args, 1e-3, 0.1, block_n=block_n)
    for o, r in zip(out, reference64(args)):
        assert o.dtype == torch.float32 and o.shape == r.shape
        assert rel_err(o, r) < 1e-4


@pytest.mark.parametrize("precision", ["ieee", "tf32x3"])
def test_precision_modes_match_reference(precision):
    """Both modes hold 1e-4 (the interpreter computes every dot in fp32; on a GPU tf32x3 runs on tensor cores)."""
    args = problem(2, 50, 7, 40, seed=1)
    out = gmm_estep(*args, precision=precision)
    for o, r in zip(out, reference64(args)):
        assert rel_err(o, r) < 1e-4
    with pytest.raises(ValueError, match="precision"):
        gmm_estep_triton(*args, 1e-3, 0.1, precision="tf32")


def test_no_mask_equals_all_true_mask():
    x, mask, pi, mu, var, m = problem(2, 40, 16, 24)
    a = gmm_estep_triton(x, None, pi, mu, var, m, 1e-3, 0.1, block_n=16)
    b = gmm_estep_triton(x, torch.ones_like(mask), pi, mu, var, m, 1e-3, 0.1, block_n=16)
    assert all(torch.equal(u, v) for u, v in zip(a, b))


def test_repeated_runs_are_bitwise_equal():
    """Partial sums per split and a fixed-order sum over the splits: no atomics, so no run-to-run drift.
    (On CPU the interpreter runs programs in order anyway; this bites on a GPU, where the old atomics did not.)"""
    B, N, C, D = (4, 20_000, 16, 256) if DEVICE == "cuda" else (2, 96, 16, 40)
    args = problem(B, N, C, D, seed=2)
    first = gmm_estep_triton(*args, 1e-3, 0.1, block_n=32)
    for _ in range(3 if DEVICE == "cuda" else 1):
        again = gmm_estep_triton(*args, 1e-3, 0.1, block_n=32)
        assert all(torch.equal(u, v) for u, v in zip(first, again))


def test_offsets_past_2_31_elements():
    """Bag 2 of x (fp16) and of the mask starts past element 2³¹ of its storage (see wide_offsets)."""
    B, N, C, D = 3, 40, 16, 24
    x, mask, pi, mu, var, m = problem(B, N, C, D, seed=3)
    x = x.half()
    wide_x, wide_mask = past_int32(x), past_int32(mask)
    out = gmm_estep_triton(wide_x, wide_mask, pi, mu, var, m, 1e-3, 0.1, block_n=32)
    for o, r in zip(out, reference64([x, mask, pi, mu, var, m])):
        assert o.dtype == torch.float16
        assert rel_err(o, r) < 1e-3           # fp16 outputs: 2⁻¹¹ rounding


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: a contiguous x of 2³¹ fp32 elements (8 GiB)")
def test_cuda_contiguous_bags_past_2_31_elements():
    B, N, C, D = 2, 2**20 + 3, 16, 1024          # B·N·d > 2³¹
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(B, N, D, device="cuda", generator=g)
    args = [x, None, *problem(B, 1, C, D)[2:]]
    last = [x[1:], None, *(a[1:] for a in args[2:5]), args[5]]
    out = gmm_estep(*args)
    for o, r in zip(out, gmm_estep_reference(*last, 1e-3, 0.1)):
        assert rel_err(o[1:], r) < 1e-3


@pytest.mark.parametrize("precision", ["ieee", "tf32x3"])
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_kernel_matches_reference(precision):
    args = problem(4, 1000, 16, 256, device="cuda")
    ref = gmm_estep_reference(*args, 1e-3, 0.1)
    for o, r in zip(gmm_estep(*args, precision=precision), ref):
        assert rel_err(o, r) < 1e-3


def test_padding_rows_are_ignored():
    x, mask, pi, mu, var, m = problem(2, 40, 16, 24)
    padded = torch.cat([x, 100 * torch.randn(2, 9, 24, device=x.device)], 1)
    pmask = torch.cat([mask, torch.zeros(2, 9, dtype=torch.bool, device=x.device)], 1)
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
