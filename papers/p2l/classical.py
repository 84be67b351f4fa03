"""Classical solvers with no learned prior (the floors) and the world's own generator (a ceiling).

Every solver takes a batch of measurements y [B, ...] and the operator, and returns images [B, 3, H, W]
in [-1, 1]. A solver's one parameter may be a tensor of B values (one per image), so that a tuning
grid is solved as one batch.

- `bicubic`, `lanczos` (SR): interpolation of the low-resolution measurement (torch's bicubic; PIL's
  Lanczos, per channel on float images); no parameter.
- `tikhonov` (any linear A): argmin ‖Ax − y‖² + λ‖x‖², by CG on (AᵀA + λI)x = Aᵀy (the inpainting
  closed form for a mask).
- `tv` (any linear A): argmin ½‖Ax − y‖² + w·TV(x), isotropic TV smoothed by ε, by Adam from Aᵖy
  (inpainting: the observed pixels, the missing ones at the observed mean).
- `biharmonic` (inpainting): scikit-image's `inpaint_biharmonic` on the missing pixels; no parameter.
- `generator_fit`: the world's own renderer (`data.render`) searched over every shape, colour and
  background and a grid of centres and radii covering the data's jitter; the template with the least
  ‖A g − y‖ per problem (a maximum-likelihood fit under the world's generator: a ceiling, not a method).
"""
from __future__ import annotations

import itertools

import numpy as np
import torch
import torch.nn.functional as F

from .data import ATTRIBUTES, render
from .operators import Inpainting, Operator, SuperResolution
from .solver import proximal


def _per_image(value, n: int) -> torch.Tensor:
    v = torch.as_tensor(value, dtype=torch.float32)
    return (v.expand(n) if v.dim() == 0 else v).reshape(n, 1, 1, 1)


def bicubic(y: torch.Tensor, op: Operator, _=None) -> torch.Tensor:
    return F.interpolate(y, scale_factor=op.factor, mode="bicubic", align_corners=False).clamp(-1, 1)


def lanczos(y: torch.Tensor, op: Operator, _=None) -> torch.Tensor:
    from PIL import Image

    size = y.shape[-1] * op.factor
    out = np.empty((*y.shape[:2], size, size), dtype=np.float32)
    for i, img in enumerate(y.numpy()):
        for c, ch in enumerate(img):
            out[i, c] = np.asarray(Image.fromarray(ch.astype(np.float32), mode="F")
                                   .resize((size, size), Image.Resampling.LANCZOS))
    return torch.from_numpy(out).clamp(-1, 1)


def tikhonov(y: torch.Tensor, op: Operator, lam, cg_iters: int = 50) -> torch.Tensor:
    x0 = torch.zeros_like(op.adjoint(y))
    return proximal(y, op, x0, _per_image(lam, len(y)), cg_iters).clamp(-1, 1)


def _start(y: torch.Tensor, op: Operator) -> torch.Tensor:
    if isinstance(op, Inpainting):
        m = op.mask.to(y).expand_as(y)
        fill = (m * y).sum((1, 2, 3), keepdim=True) / m.sum((1, 2, 3), keepdim=True).clamp_min(1)
        return m * y + (1 - m) * fill
    return op.pseudo_adjoint(y)


def total_variation(x: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
    """Per image: Σ √(∂x² + ∂y² + ε²) over pixels and channels (forward differences, zero at the border)."""
    dx = F.pad(x[..., :, 1:] - x[..., :, :-1], (0, 1, 0, 0))
    dy = F.pad(x[..., 1:, :] - x[..., :-1, :], (0, 0, 0, 1))
    return (dx**2 + dy**2 + eps**2).sqrt().sum((1, 2, 3))


def tv(y: torch.Tensor, op: Operator, weight, steps: int = 200, lr: float = 0.02) -> torch.Tensor:
    w = _per_image(weight, len(y)).flatten()
    x = _start(y, op).clone().requires_grad_(True)
    opt = torch.optim.Adam([x], lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    for _ in range(steps):
        opt.zero_grad()
        fit = 0.5 * (op.forward(x) - y).flatten(1).pow(2).sum(1)
        (fit + w * total_variation(x)).sum().backward()
        opt.step()
        sched.step()
    return x.detach().clamp(-1, 1)


def biharmonic(y: torch.Tensor, op: Operator, _=None) -> torch.Tensor:
    from skimage.restoration import inpaint_biharmonic

    missing = (op.mask[0, 0] < 0.5).numpy()
    out = [inpaint_biharmonic(img.permute(1, 2, 0).double().numpy(), missing, channel_axis=-1) for img in y]
    return torch.from_numpy(np.stack(out)).permute(0, 3, 1, 2).float().clamp(-1, 1)


# solver name → (function, parameter name or None); the tasks each solver applies to
SOLVERS = {"bicubic": (bicubic, None), "lanczos": (lanczos, None), "tikhonov": (tikhonov, "lam"),
           "tv": (tv, "weight"), "biharmonic": (biharmonic, None)}


def solvers_for(op: Operator) -> list[str]:
    """The classical solvers that apply to this operator (the strongest of them is chosen on validation)."""
    if isinstance(op, SuperResolution):
        return ["bicubic", "lanczos", "tikhonov", "tv"]
    if isinstance(op, Inpainting):
        return ["biharmonic", "tv"]
    return ["tikhonov", "tv"]


def templates(size: int, centres: int = 9, radii: int = 5) -> torch.Tensor:
    """Every rendering of the world on a grid covering its jitter (`data.sample`: centre size/2 ±
    0.08·size, radius 0.28–0.36·size): [n_templates, 3, size, size]."""
    cs = size / 2 + np.linspace(-0.08, 0.08, centres) * size
    rs = size * np.linspace(0.28, 0.36, radii)
    imgs = [render(s, c, b, size, cx, cy, r) for s, c, b in itertools.product(*ATTRIBUTES.values())
            for cx in cs for cy in cs for r in rs]
    return torch.from_numpy(np.stack(imgs))


def generator_fit(y: torch.Tensor, op: Operator, bank: torch.Tensor, chunk: int = 2048) -> torch.Tensor:
    """Per problem, the template of `bank` with the least ‖A g − y‖²."""
    yf = y.flatten(1).double()
    best_d = torch.full((len(y),), float("inf"), dtype=torch.float64)
    best_i = torch.zeros(len(y), dtype=torch.long)
    for s in range(0, len(bank), chunk):
        ag = op.forward(bank[s:s + chunk]).flatten(1).double()
        d = (yf**2).sum(1, keepdim=True) - 2 * yf @ ag.T + (ag**2).sum(1)[None]
        v, i = d.min(1)
        better = v < best_d
        best_d[better], best_i[better] = v[better], i[better] + s
    return bank[best_i].clone()
