"""DPS in pixel space (Chung et al., Algorithm 1 with the reference code's step): DDPM ancestral
sampling on `steps` strided timesteps of a pixel prior, each step followed by a gradient step on the
measurement residual's norm (not its square),

    x̂₀ = clip((x_t − √(1−ᾱ_t) ε_θ(x_t, t)) / √ᾱ_t, −1, 1)
    x'_{t−1} = the DDPM posterior mean of (x̂₀, x_t) + σ_t z        (σ_t² = β̃_t, fixed_small; z = 0 at the end)
    x_{t−1} = x'_{t−1} − ζ ∇_{x_t} ‖y − A x̂₀(x_t)‖₂                 (per image)

With ζ = 0 this is diffusers' DDPMScheduler.step (tests/p2l/test_p2l_pixel_dps.py checks it)."""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from shared.progress import progress


@dataclass
class PixelSolution:
    x: torch.Tensor          # [N, 3, H, W] in [-1, 1]
    nfe: int                 # UNet evaluations per image (each with one backward pass)
    wall_s: float


def timesteps(scheduler, steps: int) -> list[tuple[int, int]]:
    """(t, t_prev) pairs of DDPM's strided schedule (diffusers' `set_timesteps`, leading spacing); t_prev
    is −1 at the last step (ᾱ = 1)."""
    scheduler.set_timesteps(int(steps))
    ts = [int(t) for t in scheduler.timesteps]
    return list(zip(ts, ts[1:] + [-1]))


def ancestral(scheduler, eps, x, t: int, t_prev: int, noise):
    """x̂₀ (clipped) and the DDPM ancestral sample x'_{t_prev} (differentiable in x)."""
    ac = scheduler.alphas_cumprod
    a_t = ac[t]
    a_prev = ac[t_prev] if t_prev >= 0 else torch.tensor(1.0)
    alpha = a_t / a_prev
    beta = 1 - alpha
    x0 = ((x - (1 - a_t).sqrt() * eps) / a_t.sqrt()).clamp(-1, 1)
    mean = (a_prev.sqrt() * beta / (1 - a_t)) * x0 + (alpha.sqrt() * (1 - a_prev) / (1 - a_t)) * x
    if t_prev >= 0:
        var = ((1 - a_prev) / (1 - a_t) * beta).clamp(min=1e-20)
        mean = mean + var.sqrt() * noise
    return x0, mean


def residual_norm(op, x0, y):
    """Per image ‖y − A x̂₀‖₂ (the norm, not its square)."""
    return (y - op.forward(x0)).flatten(1).norm(dim=1)


def dps_step(unet, scheduler, op, y, x, t: int, t_prev: int, zeta, noise):
    """One DPS step: the ancestral sample minus ζ times the gradient of the residual norm (per image)."""
    x = x.detach().requires_grad_(True)
    tt = torch.full((x.shape[0],), t, dtype=torch.long)
    eps = unet(x, tt).sample
    x0, x_prime = ancestral(scheduler, eps, x, t, t_prev, noise)
    zeta = torch.as_tensor(zeta, dtype=x.dtype).reshape(-1, *[1] * (x.dim() - 1))
    if bool((zeta != 0).any()):
        (grad,) = torch.autograd.grad(residual_norm(op, x0, y).sum(), x)   # images are independent: per-image grads
    else:
        grad = torch.zeros_like(x)
    return (x_prime - zeta * grad).detach(), x0.detach()


def dps(unet, scheduler, op, y, steps: int, zeta, seed: int, repeats: int = 1, image_shape=None) -> PixelSolution:
    """DPS on every measurement of y in one batch. `zeta`: a number or one value per row of y.
    repeats > 1: y is `repeats` copies of the same problems (a tuning draw), which then share x_T and
    every step's noise per image (seeded `seed`: the batch changes no image's draws)."""
    start = time.perf_counter()
    n = y.shape[0] // repeats
    shape = tuple(image_shape or (3, unet.config.sample_size, unet.config.sample_size))
    g = torch.Generator().manual_seed(int(seed))
    x = torch.randn(n, *shape, generator=g).repeat(repeats, 1, 1, 1)
    zeta = torch.as_tensor(zeta, dtype=torch.float32)
    zeta = zeta.expand(y.shape[0]) if zeta.dim() == 0 else zeta
    pairs = timesteps(scheduler, steps)
    for t, t_prev in progress(pairs, f"pixel DPS ({len(pairs)} steps, {y.shape[0]} images)"):
        noise = torch.randn(n, *shape, generator=g).repeat(repeats, 1, 1, 1)
        x, _ = dps_step(unet, scheduler, op, y, x, t, t_prev, zeta, noise)
    return PixelSolution(x=x.clamp(-1, 1), nfe=len(pairs), wall_s=time.perf_counter() - start)
