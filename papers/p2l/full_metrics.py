"""The paper's headline metrics at the full profile: LPIPS per image and FID per method against the
ground-truth images, through torchmetrics with weights from local paths (nothing downloaded).

LPIPS: torchmetrics' `LearnedPerceptualImagePatchSimilarity` (its linear heads ship with torchmetrics;
the backbone's ImageNet weights come from torchvision's cache under `metrics.torch_home`, e.g.
hub/checkpoints/vgg16-397923af.pth). FID: `shared.image_metrics` with the local TorchScript InceptionV3.
Images are tensors in [-1, 1] (N, 3, H, W), as the solvers return them.
"""
from __future__ import annotations

import os

import numpy as np
import torch

from shared.assets import require_path
from shared.config import ConfigError

BACKBONE_FILES = {"vgg": "vgg16-397923af.pth", "alex": "alexnet-owt-7be5be79.pth", "squeeze": "squeezenet1_1-b8a52dc0.pth"}


class FullMetrics:
    """LPIPS and FID as `metrics` asks; `scores(x, gt)` per image, `fid(x, gt)` per set."""

    def __init__(self, cfg):
        m = cfg.metrics
        self.lpips = self.inception = None
        if m.lpips:
            try:
                import torchvision  # noqa: F401
            except Exception as err:  # noqa: BLE001 - any import failure means the same to the user
                raise ConfigError(f"metrics.lpips needs torchvision (the build matching torch), which does not "
                                  f"import here ({type(err).__name__}); set metrics.lpips=false") from err
            home = require_path(m.torch_home, what="torchvision's cache folder with the LPIPS backbone weights",
                                fetch=f"download.pytorch.org/models/{BACKBONE_FILES[m.lpips_net]} into "
                                      "<torch_home>/hub/checkpoints/", config_key="metrics.torch_home")
            require_path(home / "hub" / "checkpoints" / BACKBONE_FILES[m.lpips_net], what=f"the {m.lpips_net} weights",
                         fetch=f"download.pytorch.org/models/{BACKBONE_FILES[m.lpips_net]}", config_key="metrics.torch_home")
            os.environ["TORCH_HOME"] = str(home)   # torchvision reads its pretrained weights from this cache
            from torchmetrics.image.lpip import LearnedPerceptualImagePatchSimilarity

            self.lpips = LearnedPerceptualImagePatchSimilarity(net_type=m.lpips_net, reduction="mean").eval()
        if m.fid:
            from shared.image_metrics import InceptionFeatures

            self.inception = InceptionFeatures(require_path(
                m.inception_path, what="TorchScript InceptionV3 feature network (inception-2015-12-05.pt)",
                fetch="the StyleGAN2-ADA metrics file inception-2015-12-05.pt", config_key="metrics.inception_path"))

    @torch.no_grad()
    def scores(self, x: torch.Tensor, gt: torch.Tensor) -> dict:
        """{"lpips": per-image array} (empty without LPIPS)."""
        if self.lpips is None:
            return {}
        clamp = lambda t: t.float().clamp(-1, 1)  # noqa: E731  LPIPS takes [-1, 1]
        return {"lpips": np.array([float(self.lpips(clamp(a[None]), clamp(b[None]))) for a, b in zip(x, gt)])}

    def fid(self, x: torch.Tensor, gt: torch.Tensor) -> float | None:
        """FID of the reconstructions against the ground truth (None without it)."""
        if self.inception is None:
            return None
        from shared.image_metrics import fid_kid

        to_np = lambda t: ((t.float().clamp(-1, 1) + 1) / 2).permute(0, 2, 3, 1).numpy()  # noqa: E731
        return fid_kid(to_np(x), to_np(gt), self.inception)["fid"]
