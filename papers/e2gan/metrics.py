"""Quality against the teacher: PSNR, SSIM, and a feature Fréchet distance (the FID proxy, smoke/tiny);
at full, FID and KID in InceptionV3 features (`shared.image_metrics`) and CLIP score (torchmetrics,
weights from local paths).

The proxy's features are the penultimate activations of a small CNN trained here to tell the
teacher's edits apart (`fd_net`); `image_features` (HSV histograms, HOG, LBP) describe what an edit
does for clustering concepts and data. The Fréchet distance is computed after a PCA fitted on the
teacher's outputs:  FD = ‖μ₁ − μ₂‖² + Tr(Σ₁ + Σ₂ − 2 (Σ₁ Σ₂)^½).
"""
from __future__ import annotations

import numpy as np
import torch
from scipy import linalg
from skimage import color, feature
from skimage.metrics import structural_similarity


def psnr(pred: np.ndarray, target: np.ndarray) -> float:
    """10·log10(1 / MSE) of the MSE pooled over every pixel of every image, images in [0, 1].

    Pooled, not a mean of per-image PSNRs: an image the edit leaves unchanged (a hue shift of a grey
    face) would give an exact copy an unbounded per-image PSNR and let it dominate the mean."""
    mse = float(((pred.astype(np.float64) - target) ** 2).mean())
    return float(10 * np.log10(1.0 / max(mse, 1e-12)))


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


def feature_fd(pred: np.ndarray, target: np.ndarray, dims: int = 16, features=image_features) -> float:
    """Fréchet distance between `features` of `pred` and `target`, in a PCA space fitted on `target`."""
    from sklearn.decomposition import PCA

    ft, fp = features(target), features(pred)
    pca = PCA(n_components=min(dims, len(ft) - 1, ft.shape[1]), random_state=0).fit(ft)
    a, b = pca.transform(ft), pca.transform(fp)
    cov = lambda f: np.atleast_2d(np.cov(f, rowvar=False))  # noqa: E731
    return frechet_distance(a.mean(0), cov(a), b.mean(0), cov(b))


def quality(pred: np.ndarray, target: np.ndarray, fd_dims: int = 16, features=image_features) -> dict:
    return {"psnr": psnr(pred, target), "ssim": ssim(pred, target),
            "fd": feature_fd(pred, target, fd_dims, features)}


# ----------------------------------------------------------------------------- the paper's metrics (full)
class _CLIPFeatures(torch.nn.Module):
    """A transformers CLIPModel whose `get_image_features` / `get_text_features` return the projected
    embedding tensor, as torchmetrics' CLIPScore expects (transformers 5 returns a model output whose
    `pooler_output` holds it)."""

    def __init__(self, model):
        super().__init__()
        self.model, self.config = model, model.config

    @staticmethod
    def _tensor(out):
        return out if torch.is_tensor(out) else out.pooler_output

    def get_image_features(self, *args, **kwargs):
        return self._tensor(self.model.get_image_features(*args, **kwargs))

    def get_text_features(self, *args, **kwargs):
        return self._tensor(self.model.get_text_features(*args, **kwargs))


def clip_score(pred: np.ndarray, prompt: str, clip_path) -> float:
    """torchmetrics CLIPScore of the images against their prompt (max(100·mean cos, 0)), CLIP loaded
    from a local folder."""
    from torchmetrics.multimodal.clip_score import CLIPScore
    from transformers import CLIPModel, CLIPProcessor

    load = lambda: (_CLIPFeatures(CLIPModel.from_pretrained(str(clip_path), local_files_only=True)),  # noqa: E731
                    CLIPProcessor.from_pretrained(str(clip_path), local_files_only=True))
    metric = CLIPScore(model_name_or_path=load)
    imgs = torch.from_numpy((np.clip(pred, 0, 1) * 255).astype(np.uint8)).permute(0, 3, 1, 2)
    metric.update(list(imgs), [prompt] * len(imgs))
    return float(metric.compute())
