"""Quality against the teacher: PSNR, SSIM, and a feature Fréchet distance (the FID proxy).

Features (the CPU stand-in for Inception/CLIP): an 8-bin HSV histogram per channel, HOG and a
uniform-LBP histogram of the gray image. The Fréchet distance is computed after a PCA fitted on the
teacher's outputs:  FD = ‖μ₁ − μ₂‖² + Tr(Σ₁ + Σ₂ − 2 (Σ₁ Σ₂)^½).
"""
from __future__ import annotations

import numpy as np
from scipy import linalg
from skimage import color, feature
from skimage.metrics import structural_similarity


def psnr(pred: np.ndarray, target: np.ndarray) -> float:
    """Mean over images of 10·log10(1 / MSE), images in [0, 1]."""
    mse = ((pred.astype(np.float64) - target) ** 2).reshape(len(pred), -1).mean(1)
    return float(np.mean(10 * np.log10(1.0 / np.maximum(mse, 1e-12))))


def ssim(pred: np.ndarray, target: np.ndarray) -> float:
    win = min(7, pred.shape[1] - (1 - pred.shape[1] % 2))
    return float(np.mean([structural_similarity(p, t, channel_axis=-1, data_range=1.0, win_size=win)
                          for p, t in zip(pred.astype(np.float64), target.astype(np.float64))]))


def image_features(images: np.ndarray) -> np.ndarray:
    """(N, H, W, 3) in [0, 1] → (N, F): HSV histograms, HOG and LBP histogram."""
    out = []
    for img in images.astype(np.float64):
        hsv = color.rgb2hsv(img)
        hists = [np.histogram(hsv[..., c], bins=8, range=(0, 1))[0] / hsv[..., c].size for c in range(3)]
        gray = color.rgb2gray(img)
        cell = max(4, img.shape[0] // 4)
        hog = feature.hog(gray, orientations=8, pixels_per_cell=(cell, cell), cells_per_block=(1, 1))
        lbp = feature.local_binary_pattern((gray * 255).astype(np.uint8), 8, 1, method="uniform")
        lbp_hist = np.histogram(lbp, bins=10, range=(0, 10))[0] / lbp.size
        out.append(np.concatenate([*hists, hog, lbp_hist]))
    return np.asarray(out)


def frechet_distance(mu1, sigma1, mu2, sigma2) -> float:
    covmean = linalg.sqrtm(sigma1 @ sigma2)
    covmean = covmean.real
    return float(((mu1 - mu2) ** 2).sum() + np.trace(sigma1 + sigma2 - 2 * covmean))


def feature_fd(pred: np.ndarray, target: np.ndarray, dims: int = 16) -> float:
    """Fréchet distance between features of `pred` and `target`, in a PCA space fitted on `target`."""
    from sklearn.decomposition import PCA

    ft, fp = image_features(target), image_features(pred)
    pca = PCA(n_components=min(dims, len(ft) - 1, ft.shape[1]), random_state=0).fit(ft)
    a, b = pca.transform(ft), pca.transform(fp)
    cov = lambda f: np.atleast_2d(np.cov(f, rowvar=False))  # noqa: E731
    return frechet_distance(a.mean(0), cov(a), b.mean(0), cov(b))


def quality(pred: np.ndarray, target: np.ndarray, fd_dims: int = 16) -> dict:
    return {"psnr": psnr(pred, target), "ssim": ssim(pred, target), "fd": feature_fd(pred, target, fd_dims)}
