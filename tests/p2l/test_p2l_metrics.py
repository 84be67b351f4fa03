"""Metrics against independent computations: SSIM from its defining formula, PSNR, the FD proxy and
high-frequency energy on inputs with known values."""
import numpy as np
import pytest
import torch
from numpy.lib.stride_tricks import sliding_window_view

from papers.p2l import metrics as M


def ssim_by_formula(x: np.ndarray, ref: np.ndarray, data_range: float = 2.0, win: int = 7) -> float:
    """Wang et al. (2004) with scikit-image's defaults, written out: every win×win window that lies
    inside the image, sample (N − 1) moments, K₁ = 0.01, K₂ = 0.03, then the mean over windows and
    channels. S = (2μₓμᵣ + c₁)(2σₓᵣ + c₂) / ((μₓ² + μᵣ² + c₁)(σₓ² + σᵣ² + c₂)), c = (K·L)²."""
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    per_channel = []
    for a, b in zip(x, ref):
        wa = sliding_window_view(a, (win, win)).reshape(-1, win * win)
        wb = sliding_window_view(b, (win, win)).reshape(-1, win * win)
        mu_a, mu_b = wa.mean(1), wb.mean(1)
        var_a, var_b = wa.var(1, ddof=1), wb.var(1, ddof=1)
        cov = ((wa - mu_a[:, None]) * (wb - mu_b[:, None])).sum(1) / (win * win - 1)
        s = (2 * mu_a * mu_b + c1) * (2 * cov + c2) / ((mu_a**2 + mu_b**2 + c1) * (var_a + var_b + c2))
        per_channel.append(s.mean())
    return float(np.mean(per_channel))


@pytest.mark.parametrize("shape", [(3, 16, 16), (3, 11, 20)])
def test_ssim_matches_its_formula(shape):
    g = torch.Generator().manual_seed(0)
    x = torch.rand(3, *shape, generator=g) * 2 - 1
    ref = (x + 0.3 * torch.randn(x.shape, generator=g)).clamp(-1, 1)
    expected = [ssim_by_formula(a.double().numpy(), r.double().numpy()) for a, r in zip(x, ref)]
    np.testing.assert_allclose(M.ssim(x, ref), expected, rtol=1e-10)
    np.testing.assert_allclose(M.ssim(ref, ref), 1.0)
    assert 0.05 < min(expected) and max(expected) < 0.95          # the test images are neither equal nor unrelated


def test_psnr_fd_and_hf_energy_on_known_values():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(3, 3, 16, 16, generator=g) * 2 - 1
    ref = (x + 0.1 * torch.randn(x.shape, generator=g)).clamp(-1, 1)
    mse = ((x.double() - ref.double()) ** 2).flatten(1).mean(1).numpy()
    np.testing.assert_allclose(M.psnr(x, ref), 10 * np.log10(4 / mse), rtol=1e-6)
    f = np.random.default_rng(0).normal(size=(200, 4))
    assert M.frechet_distance(f, f) == pytest.approx(0.0, abs=1e-6)
    # Gaussians with equal covariance: FD = ‖μ₁ − μ₂‖²
    assert M.frechet_distance(f, f + 2.0) == pytest.approx(16.0, rel=1e-6)
    flat = torch.zeros(1, 3, 16, 16)
    checker = (torch.arange(16)[:, None] + torch.arange(16)[None]) % 2 * 2.0 - 1
    assert M.high_frequency_energy(flat + 0.5)[0] == 0
    assert M.high_frequency_energy(checker.expand(1, 3, 16, 16))[0] == pytest.approx(1.0)


def test_bootstrap_resamples_images_with_all_their_noise_draws():
    """Rows are draw-major (row d·n + i is image i under draw d): a resample picks images, and takes
    every draw of each picked image, so the draws of one image never count as separate units."""
    n, draws = 5, 3
    idx = M.bootstrap_indices(n, 200, seed=0, draws=draws)
    assert idx.shape == (200, n * draws)
    images = idx[:, :n]
    assert images.max() < n
    for d in range(1, draws):
        np.testing.assert_array_equal(idx[:, d * n:(d + 1) * n], images + d * n)
    assert len(np.unique(images)) == n   # every image can be drawn


def test_fd_pseudo_values_pair_by_image_and_leave_out_all_draws():
    from papers.p2l.metrics import fd_pseudo_values, frechet_distance

    rng = np.random.default_rng(0)
    ref = rng.normal(size=(200, 4))
    n, k = 12, 3
    a, b = rng.normal(0.5, 1, size=(n * k, 4)), rng.normal(0.0, 1, size=(n * k, 4))
    pa, pb = fd_pseudo_values(a, ref, n, k), fd_pseudo_values(b, ref, n, k)
    assert pa.shape == (n,)
    # pseudo-value i uses FD without image i's k rows (rows draw-major: i, n + i, 2n + i)
    keep = [r for r in range(n * k) if r % n != 3]
    np.testing.assert_allclose(pa[3], n * frechet_distance(a, ref) - (n - 1) * frechet_distance(a[keep], ref))
    # the further-off method has the larger jackknife FD, and the mean is near the plain FD
    assert pa.mean() > pb.mean()
    assert abs(pa.mean() - frechet_distance(a, ref)) < 0.5 * frechet_distance(a, ref)


def test_caption_gains_pick_the_caption_the_prompt_moved_toward():
    import torch

    from papers.p2l.metrics import caption_gains

    g = torch.Generator().manual_seed(0)
    caps = torch.randn(18, 3, 8, generator=g)
    null = torch.randn(1, 3, 8, generator=g)
    prompt = null + 0.05 * (caps[[4, 11]] - null)        # a small step toward captions 4 and 11
    gains = caption_gains(prompt, null, caps)
    assert gains.shape == (2, 18) and list(gains.argmax(1)) == [4, 11]
