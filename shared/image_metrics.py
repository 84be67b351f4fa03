"""FID and KID through torchmetrics in the features of a local TorchScript InceptionV3 (the StyleGAN2-ADA
metrics file `inception-2015-12-05.pt`, 2048-d pool features): nothing is downloaded. Used at the full
profile by P2L (reconstructions against the ground truth) and E2GAN (students against the teacher).
`write_stand_in_inception` writes a small random network with the same call signature, for the
full profile's rehearsal and the tests."""
from __future__ import annotations

import numpy as np
import torch


class InceptionFeatures(torch.nn.Module):
    """The TorchScript InceptionV3 from a local file, wrapped for torchmetrics: images in [0, 1] are
    resized to 299² and scaled to 0…255, as that network expects."""

    def __init__(self, path, device: str = "cpu"):
        super().__init__()
        self.net = torch.jit.load(str(path), map_location=device).eval()

    def forward(self, x):
        x = torch.nn.functional.interpolate(x.float(), size=(299, 299), mode="bilinear", align_corners=False)
        return self.net(x * 255.0, return_features=True)


def fid_kid(pred: np.ndarray, target: np.ndarray, feature, kid_subset: int = 50) -> dict:
    """FID and KID (torchmetrics) between `pred` and `target` (N, H, W, 3) in [0, 1], in the feature space
    of the nn.Module `feature`."""
    from torchmetrics.image.fid import FrechetInceptionDistance
    from torchmetrics.image.kid import KernelInceptionDistance

    to_t = lambda a: torch.from_numpy(np.ascontiguousarray(a)).permute(0, 3, 1, 2).float()  # noqa: E731
    fid = FrechetInceptionDistance(feature=feature, normalize=True)
    kid = KernelInceptionDistance(feature=feature, normalize=True, subset_size=min(kid_subset, len(pred)))
    for m in (fid, kid):
        m.update(to_t(target), real=True)
        m.update(to_t(pred), real=False)
    kid_mean, _ = kid.compute()
    return {"fid": float(fid.compute()), "kid": float(kid_mean)}


class _StandInInception(torch.nn.Module):
    """The InceptionV3 file's call signature, forward(x in 0…255, return_features) -> (N, 16) features."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 16, 9, stride=8)

    def forward(self, x: torch.Tensor, return_features: bool = False) -> torch.Tensor:
        return torch.tanh(self.conv(x / 255.0)).mean((2, 3))


def write_stand_in_inception(path, seed: int = 0):
    """A random TorchScript stand-in for inception-2015-12-05.pt at `path` (16-d features)."""
    torch.manual_seed(seed)
    torch.jit.script(_StandInInception()).save(str(path))
    return path
