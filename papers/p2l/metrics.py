"""Image-quality metrics: PSNR and SSIM (scikit-image), the classifier-feature Fréchet distance
(the FID proxy), attribute accuracy, high-frequency energy, and the FD proxy's bootstrap interval.

Every metric but the FD proxy is per image; the experiments write those as `shared.samples.sample`
with unit "image" (the same test images, noise and initial latents for every method, so they pair).
"""
from __future__ import annotations

import numpy as np
import torch
from scipy import linalg
from skimage.metrics import peak_signal_noise_ratio, structural_similarity


def _np(x: torch.Tensor) -> np.ndarray:
    return x.detach().cpu().double().numpy()


def psnr(x: torch.Tensor, ref: torch.Tensor) -> np.ndarray:
    """Per image, on the [-1, 1] scale (data range 2)."""
    return np.array([peak_signal_noise_ratio(r, a, data_range=2.0) for a, r in zip(_np(x), _np(ref))])


def ssim(x: torch.Tensor, ref: torch.Tensor) -> np.ndarray:
    return np.array([structural_similarity(r, a, data_range=2.0, channel_axis=0) for a, r in zip(_np(x), _np(ref))])


def frechet_distance(f1: np.ndarray, f2: np.ndarray) -> float:
    """‖μ₁ − μ₂‖² + tr(Σ₁ + Σ₂ − 2(Σ₁Σ₂)^½), the FID formula on arbitrary features."""
    mu1, mu2 = f1.mean(0), f2.mean(0)
    s1, s2 = np.cov(f1, rowvar=False), np.cov(f2, rowvar=False)
    covmean, _ = linalg.sqrtm(s1 @ s2, disp=False)
    covmean = covmean.real
    return float(((mu1 - mu2) ** 2).sum() + np.trace(s1 + s2 - 2 * covmean))


@torch.no_grad()
def features(classifier, x: torch.Tensor) -> np.ndarray:
    return classifier.features(x.float()).double().numpy()


@torch.no_grad()
@torch.no_grad()
def attribute_hits(classifier, x: torch.Tensor, labels: torch.Tensor) -> np.ndarray:
    """[N, n_attributes]: 1 where the classifier reads that attribute of that image correctly."""
    preds = torch.stack([o.argmax(1) for o in classifier(x.float())], 1)
    return (preds == labels).double().numpy()


def attribute_accuracy(classifier, x: torch.Tensor, labels: torch.Tensor) -> np.ndarray:
    """Per image: the fraction of the three attributes the classifier reads correctly."""
    preds = torch.stack([o.argmax(1) for o in classifier(x.float())], 1)
    return (preds == labels).double().mean(1).numpy()


def high_frequency_energy(x: torch.Tensor, cutoff: float = 0.25) -> np.ndarray:
    """Per image: the share of spectral energy above `cutoff` cycles/pixel (0.5 = Nyquist)."""
    X = torch.fft.fft2(x.double() - x.double().mean((-2, -1), keepdim=True))
    fy = torch.fft.fftfreq(x.shape[-2]).abs()[:, None]
    fx = torch.fft.fftfreq(x.shape[-1]).abs()[None, :]
    high = (torch.maximum(fy, fx) > cutoff).to(X.real)
    power = X.abs() ** 2
    return ((power * high).sum((-3, -2, -1)) / power.sum((-3, -2, -1)).clamp_min(1e-20)).numpy()


def bootstrap_indices(n: int, n_boot: int, seed: int, draws: int = 1) -> np.ndarray:
    """Bootstrap resamples of n images, [n_boot, n·draws] row indices. Rows are ordered draw-major
    (row d·n + i is image i under noise draw d), and an image is resampled with all its draws, since
    the draws of one image are not independent units."""
    images = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    return np.concatenate([images + d * n for d in range(draws)], axis=1)


def percentile_interval(boots: np.ndarray) -> list[float]:
    """[lo, hi]: the 95% bootstrap percentile interval (for the FD proxy, which has no per-image values)."""
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return [float(lo), float(hi)]


def per_image_residual(operator, x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """‖y − A x̂‖ / √m per image (compare with σ_y)."""
    r = (y - operator.forward(x)).flatten(1)
    return (r.norm(dim=1) / r.shape[1] ** 0.5).double().numpy()


def fd_pseudo_values(feat: np.ndarray, ref_feat: np.ndarray, n: int, draws: int = 1) -> np.ndarray:
    """Per image, the jackknife pseudo-value of the FD proxy: n·FD(all) − (n − 1)·FD(without image i),
    the image left out with all its noise draws (rows draw-major, as `bootstrap_indices`). Their mean is
    the jackknife estimate of FD; they are linear in FD, so the pseudo-values of two methods on the same
    images pair by image and their difference is that of FD(a) − FD(b). One value per image, so the
    ledger decides an FD comparison by its paired bootstrap over images."""
    full = frechet_distance(feat, ref_feat)
    rows = np.arange(n * draws).reshape(draws, n)
    out = np.empty(n)
    for i in range(n):
        keep = np.delete(rows, i, axis=1).ravel()
        out[i] = n * full - (n - 1) * frechet_distance(feat[keep], ref_feat)
    return out


def caption_gains(prompt: torch.Tensor, null: torch.Tensor, captions: torch.Tensor) -> np.ndarray:
    """[B, n_captions]: how much the tuned prompt's cosine to each caption's embedding rose over the null
    prompt's, cos(C*, C_c) − cos(C_∅, C_c). The prompt moves toward its own caption where the true
    caption has the largest gain (not merely the largest cosine, which C_∅ dominates)."""
    p, c = prompt.flatten(1).double(), captions.flatten(1).double()
    z = null.flatten(1).double()[:1]
    cos = torch.nn.functional.normalize(p, dim=1) @ torch.nn.functional.normalize(c, dim=1).T
    base = torch.nn.functional.normalize(z, dim=1) @ torch.nn.functional.normalize(c, dim=1).T
    return (cos - base).numpy()
