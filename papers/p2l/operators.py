"""Linear measurement operators y = A x + n on [B, C, H, W] images in [-1, 1].

Each operator has `forward` (A), `adjoint` (Aᵀ, the exact transpose: ⟨Ax, y⟩ = ⟨x, Aᵀy⟩),
`pseudo_adjoint` (the back-projection PSLD's gluing term uses: Aᵀ for blur and inpainting, the
nearest-neighbour upsampler for super-resolution, as DPS's `Resizer` pair does), `normal`
(AᵀA) and `measure` (A x + σ_y n, seeded).
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from shared.seeding import derive_seed

TASKS = ("sr", "gblur", "motion", "inpaint_box", "inpaint_random")


class Operator:
    name = "operator"

    def __init__(self, sigma_y: float = 0.05):
        self.sigma_y = float(sigma_y)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def adjoint(self, y: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def pseudo_adjoint(self, y: torch.Tensor) -> torch.Tensor:
        return self.adjoint(y)

    def normal(self, x: torch.Tensor) -> torch.Tensor:
        return self.adjoint(self.forward(x))

    def measure(self, x: torch.Tensor, seed: int) -> torch.Tensor:
        y = self.forward(x)
        g = torch.Generator().manual_seed(derive_seed(seed, "noise", self.name))
        return y + self.sigma_y * torch.randn(y.shape, generator=g).to(y)


class SuperResolution(Operator):
    """A = average pooling by `factor`; Aᵀ = nearest upsampling / factor²."""

    name = "sr"

    def __init__(self, factor: int = 4, sigma_y: float = 0.05):
        super().__init__(sigma_y)
        self.factor = int(factor)

    def forward(self, x):
        return F.avg_pool2d(x, self.factor)

    def adjoint(self, y):
        return F.interpolate(y, scale_factor=self.factor, mode="nearest") / self.factor**2

    def pseudo_adjoint(self, y):
        return F.interpolate(y, scale_factor=self.factor, mode="nearest")


class Blur(Operator):
    """A = per-channel convolution with a fixed kernel (zero padding); Aᵀ = the transposed convolution."""

    def __init__(self, kernel: torch.Tensor, name: str, sigma_y: float = 0.05):
        super().__init__(sigma_y)
        self.kernel = kernel.float() / kernel.sum()
        self.name = name

    def _weight(self, x):
        k = self.kernel.to(x)
        return k[None, None].expand(x.shape[1], 1, *k.shape)

    def forward(self, x):
        return F.conv2d(x, self._weight(x), padding=self.kernel.shape[-1] // 2, groups=x.shape[1])

    def adjoint(self, y):
        return F.conv_transpose2d(y, self._weight(y), padding=self.kernel.shape[-1] // 2, groups=y.shape[1])


class Inpainting(Operator):
    """A = Aᵀ = multiplication by a binary mask m (1 = observed); y lives on the full grid."""

    def __init__(self, mask: torch.Tensor, name: str, sigma_y: float = 0.05):
        super().__init__(sigma_y)
        self.mask = mask.float()
        self.name = name

    def forward(self, x):
        return self.mask.to(x) * x

    def adjoint(self, y):
        return self.mask.to(y) * y


def gaussian_kernel(size: int, sigma: float) -> torch.Tensor:
    r = torch.arange(size, dtype=torch.float64) - (size - 1) / 2
    g = torch.exp(-(r**2) / (2 * sigma**2))
    return (g[:, None] * g[None, :]).float()


def motion_kernel(size: int, intensity: float, seed: int) -> torch.Tensor:
    """A seeded motion-blur kernel: a random walk (momentum `intensity`) rasterised on a size×size grid."""
    rng = np.random.default_rng(derive_seed(seed, "motion_kernel"))
    steps = 4 * size
    angle = rng.uniform(0, 2 * math.pi)
    pos = np.zeros(2)
    path = [pos.copy()]
    for _ in range(steps):
        angle += rng.normal(0, 1.0) * intensity
        pos = pos + 0.25 * np.array([math.cos(angle), math.sin(angle)])
        path.append(pos.copy())
    path = np.asarray(path)
    path -= path.mean(0)
    extent = np.abs(path).max() + 1e-8
    path *= (size / 2 - 0.6) / max(extent, size / 2 - 0.6)
    k = np.zeros((size, size))
    for px, py in path + (size - 1) / 2:
        i, j = int(round(py)), int(round(px))
        k[min(max(i, 0), size - 1), min(max(j, 0), size - 1)] += 1
    return torch.from_numpy(k / k.sum()).float()


def box_mask(image_size: int, box: int) -> torch.Tensor:
    m = torch.ones(1, 1, image_size, image_size)
    lo = (image_size - box) // 2
    m[..., lo:lo + box, lo:lo + box] = 0
    return m


def random_mask(image_size: int, missing: float, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(derive_seed(seed, "random_mask"))
    return (torch.rand(1, 1, image_size, image_size, generator=g) >= missing).float()


def build_operator(task: str, image_size: int, *, sigma_y: float = 0.05, factor: int = 4, kernel_size: int = 9,
                   blur_sigma: float = 2.0, motion_intensity: float = 0.5, box: int = 12, missing: float = 0.7,
                   seed: int = 0) -> Operator:
    """The measurement operator of `task` (one of TASKS) for image_size×image_size images."""
    if task == "sr":
        return SuperResolution(factor, sigma_y)
    if task == "gblur":
        return Blur(gaussian_kernel(kernel_size, blur_sigma), "gblur", sigma_y)
    if task == "motion":
        return Blur(motion_kernel(kernel_size, motion_intensity, seed), "motion", sigma_y)
    if task == "inpaint_box":
        return Inpainting(box_mask(image_size, box), "inpaint_box", sigma_y)
    if task == "inpaint_random":
        return Inpainting(random_mask(image_size, missing, seed), "inpaint_random", sigma_y)
    raise ValueError(f"unknown task {task!r}; choose from {TASKS}")
