"""P2L and its baselines: one DDIM (η = 0) posterior sampler with switches.

For t = T … 1, with ẑ₀(z_t, C) = (z_t − √(1−ᾱ_t) ε_θ(z_t, t, C)) / √ᾱ_t:

1. Prompt update (P2L, Eq. 97): K Adam steps on C to lower ‖y − A D(ẑ₀(z_t, C))‖² at fixed z_t;
   C is one leaf tensor owned by one Adam optimiser for the whole trajectory, warm-started,
   initialised to C_∅; the Adam lr is `prompt_lr`·rms(C_∅) (lr 0 or K = 0 switches it off). prompt_lr
   may be per image (a tuning grid in one batch): one Adam parameter group per value, which is the
   same update as one optimiser per value, since Adam acts element by element.
2. ε̂ = ε_θ(z_t, t, C*), ẑ₀ = ẑ₀(z_t, C*), keeping the graph to z_t.
3. Projection (P2L, Eq. 98), every τ steps: x* = argmin_x ‖y − Ax‖² + λ‖x − D(ẑ₀)‖² (CG, or the
   closed form (m⊙y + λD)/(m + λ) for inpainting), then z* = E(x*) (posterior mean, detached).
4. z'_{t−1} = √ᾱ_{t−1} z* + √(1−ᾱ_{t−1}) ε̂   (z* = ẑ₀ when not projecting).
5. z_{t−1} = z'_{t−1} − ∇_{z_t}[ ρ‖y − A D(ẑ₀)‖ + γ_gml‖ẑ₀ − E(D(ẑ₀))‖ + γ_glue‖ẑ₀ − E(Aᵖy + (I − AᵖA) D(ẑ₀))‖ ]
   (norms, not squared norms; per-sample norms summed over the batch, so per-sample gradients are exact).

Methods are presets of these switches (`METHODS`); any hyper-parameter can be overridden.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from shared.progress import progress

from .models import LatentDiffusion
from .operators import Inpainting, Operator

BASE = dict(rho=1.0, gamma_gml=0.0, gamma_glue=0.0, prompt_lr=0.0, prompt_steps=0, projection=False,
            tau=1, lam=1e-4, cg_iters=5, prompt="null", encoder_sample=False, record_every=0)
METHODS = {
    "ddim": dict(rho=0.0),
    "ldps": dict(),
    "gml_dps": dict(gamma_gml=0.1),
    "psld": dict(gamma_glue=0.1, encoder_sample=True),
    "p2l": dict(prompt_lr=1e-3, prompt_steps=1, projection=True, tau=1),
    "p2l_prompt_only": dict(prompt_lr=1e-3, prompt_steps=1),
    "p2l_projection_only": dict(projection=True, tau=1),
    "p2l_glue": dict(prompt_lr=1e-3, prompt_steps=1, gamma_glue=0.1),
    "oracle": dict(prompt="true"),
    "oracle_projection": dict(prompt="true", projection=True, tau=1),
}


@dataclass
class Solution:
    x: torch.Tensor                       # the reconstruction D(ẑ₀) at the last step, [B, 3, H, W]
    z0: torch.Tensor                      # its latent
    prompt: torch.Tensor                  # the final prompt C*
    nfe: int                              # UNet evaluations per image
    wall_s: float
    decoder_calls: int = 0                # D evaluations per image (forward passes; the backward not counted)
    encoder_calls: int = 0                # E evaluations per image
    trajectory: dict = field(default_factory=dict)   # per recorded step: t, off_range, prompt_cos (batch means)
    per_image: dict = field(default_factory=dict)    # the same records per image: {key: [n_records, B]}


def hparams_of(method: str, **overrides) -> dict:
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {sorted(METHODS)}")
    unknown = set(overrides) - set(BASE)
    if unknown:
        raise ValueError(f"unknown hyper-parameter(s) {sorted(unknown)}; valid: {sorted(BASE)}")
    return {**BASE, **METHODS[method], **overrides}


def per_sample_norm(r: torch.Tensor) -> torch.Tensor:
    return r.flatten(1).norm(dim=1)


def conjugate_gradient(apply, b: torch.Tensor, x0: torch.Tensor, iters: int) -> torch.Tensor:
    """Solve apply(x) = b per sample (apply symmetric positive definite), starting from x0."""
    x = x0.clone()
    r = b - apply(x)
    p = r.clone()
    rs = (r * r).flatten(1).sum(1)
    for _ in range(iters):
        Ap = apply(p)
        alpha = rs / (p * Ap).flatten(1).sum(1).clamp_min(1e-20)
        x = x + alpha.view(-1, 1, 1, 1) * p
        r = r - alpha.view(-1, 1, 1, 1) * Ap
        rs_new = (r * r).flatten(1).sum(1)
        p = r + (rs_new / rs.clamp_min(1e-20)).view(-1, 1, 1, 1) * p
        rs = rs_new
    return x


def proximal(y: torch.Tensor, operator: Operator, x_bar: torch.Tensor, lam: float, cg_iters: int = 5,
             closed_form: bool = True) -> torch.Tensor:
    """x* = argmin_x ‖y − Ax‖² + λ‖x − x̄‖²  ⇔  (AᵀA + λI) x = Aᵀy + λx̄."""
    if torch.is_tensor(lam) and lam.dim() > 0:
        lam = lam.to(y).view(-1, *[1] * (y.dim() - 1))
    if closed_form and isinstance(operator, Inpainting):
        m = operator.mask.to(y)
        return (m * y + lam * x_bar) / (m + lam)
    if torch.is_tensor(lam) and lam.dim() > 0:   # per image (a tuning grid solved as one batch)
        lam = lam.to(y).view(-1, *[1] * (y.dim() - 1))
    b = operator.adjoint(y) + lam * x_bar
    return conjugate_gradient(lambda v: operator.normal(v) + lam * v, b, x_bar, cg_iters)


def tweedie(ldm: LatentDiffusion, z_t: torch.Tensor, t: int, C: torch.Tensor, alpha_bar: torch.Tensor):
    """ẑ₀(z_t, C) = (z_t − √(1−ᾱ_t) ε_θ(z_t, t, C)) / √ᾱ_t, and ε̂."""
    e = ldm.eps(z_t, t, C)
    return (z_t - (1 - alpha_bar).sqrt() * e) / alpha_bar.sqrt(), e


def prompt_loss(ldm: LatentDiffusion, z_t: torch.Tensor, t: int, C: torch.Tensor, alpha_bar: torch.Tensor,
                y: torch.Tensor, operator: Operator) -> torch.Tensor:
    """L(C) = Σ_b ‖y_b − A D(ẑ₀(z_t, C))_b‖² at fixed z_t (Eq. 97)."""
    z0, _ = tweedie(ldm, z_t.detach(), t, C, alpha_bar)
    return (per_sample_norm(y - operator.forward(ldm.decode(z0))) ** 2).sum()


def off_range_ratio(ldm: LatentDiffusion, z: torch.Tensor) -> torch.Tensor:
    """‖z − E(D(z))‖ / ‖z‖ per sample: how far a latent lies from the encoder's range."""
    with torch.no_grad():
        return per_sample_norm(z - ldm.encode(ldm.decode(z))) / per_sample_norm(z).clamp_min(1e-12)


def _cos(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cosine_similarity(a.flatten(1), b.flatten(1), dim=1)


def solve(method: str, y: torch.Tensor, operator: Operator, ldm: LatentDiffusion, *, steps: int, seed: int,
          captions: list[str] | None = None, z_init: torch.Tensor | None = None, **hparams) -> Solution:
    """Reconstruct x from y = A x + n with `method` (a key of METHODS) in `steps` DDIM steps.

    `captions` gives the true captions: needed for the oracle prompt and to record the prompt's
    cosine to the true caption's embedding (hparams record_every > 0). `z_init` replaces the seeded
    initial latent z_T (a tuning grid gives every point the same z_T per image).
    """
    hp = hparams_of(method, **hparams)
    start = time.perf_counter()
    device = ldm.device
    y = y.to(device)
    B = y.shape[0]
    sched = ldm.scheduler
    sched.set_timesteps(steps)
    timesteps = sched.timesteps.tolist()
    acp = sched.alphas_cumprod.to(device, torch.float64)
    final_acp = sched.final_alpha_cumprod.to(device, torch.float64)
    stride = sched.config.num_train_timesteps // steps

    C_null = ldm.null_prompt(B)
    C_true = ldm.embed(captions) if captions is not None else None
    if hp["prompt"] == "true":
        if C_true is None:
            raise ValueError("the oracle prompt needs the true captions (captions=...)")
        C = C_true.clone()
    else:
        C = C_null.clone()
    lr = torch.as_tensor(hp["prompt_lr"], dtype=torch.float32).flatten().expand(B).to(device)
    tune_prompt = bool((lr > 0).any()) and hp["prompt_steps"] > 0
    rms_null = C_null.pow(2).mean().sqrt().item()
    opt = None
    if tune_prompt:   # one leaf tensor and one Adam parameter group per distinct lr (per image)
        values = sorted(set(lr.tolist()))
        parts = [C[lr == v].clone().requires_grad_(True) for v in values]
        inverse = torch.argsort(torch.cat([torch.nonzero(lr == v).flatten() for v in values]))
        opt = torch.optim.Adam([{"params": [c], "lr": v * rms_null} for c, v in zip(parts, values)])

        def current():
            return torch.cat(parts)[inverse]
    else:
        def current():
            return C

    g = torch.Generator(device="cpu").manual_seed(seed)
    size = ldm.unet.config.sample_size
    z = torch.randn(B, ldm.latent_channels, size, size, generator=g).to(device) if z_init is None else z_init.to(device)
    enc_gen = torch.Generator(device="cpu").manual_seed(seed + 1)
    nfe = dec = enc = 0
    # ρ, γ_gml, γ_glue may be per-image tensors [B] (a tuning grid solved as one batch)
    weights = {k: torch.as_tensor(hp[k], dtype=torch.float32, device=device) for k in ("rho", "gamma_gml", "gamma_glue")}
    active = {k: bool((w != 0).any()) for k, w in weights.items()}
    tau = torch.as_tensor(hp["tau"], device=device).round().long()
    lam = torch.as_tensor(hp["lam"], dtype=torch.float32, device=device) if torch.is_tensor(hp["lam"]) else hp["lam"]
    traj = {"step": [], "t": [], "off_range": [], "prompt_cos": [], "null_cos": []}
    records = {"off_range": [], "prompt_cos": [], "null_cos": []}

    for i, t in enumerate(progress(timesteps, f"{method} ({steps} DDIM steps, {y.shape[0]} images)")):
        t_prev = t - stride
        a_prev = (acp[t_prev] if t_prev >= 0 else final_acp).float()

        # 1. prompt update at fixed z_t
        if tune_prompt:
            for _ in range(int(hp["prompt_steps"])):
                opt.zero_grad(set_to_none=True)
                loss = prompt_loss(ldm, z, t, current(), acp[t].float(), y, operator)
                nfe, dec = nfe + 1, dec + 1
                loss.backward()
                opt.step()
        prompt = current().detach()

        # 2. Tweedie estimate with the graph to z_t
        z_t = z.detach().requires_grad_(any(active.values()))
        with torch.set_grad_enabled(z_t.requires_grad):
            z0, eps = tweedie(ldm, z_t, t, prompt, acp[t].float())
            nfe, dec = nfe + 1, dec + 1
            x0 = ldm.decode(z0)
            loss = (weights["rho"] * per_sample_norm(y - operator.forward(x0))).sum()
            if active["gamma_gml"]:
                enc += 1
                loss = loss + (weights["gamma_gml"] * per_sample_norm(
                    z0 - ldm.encode(x0, hp["encoder_sample"], enc_gen))).sum()
            if active["gamma_glue"]:
                enc += 1
                glued = operator.pseudo_adjoint(y) + x0 - operator.pseudo_adjoint(operator.forward(x0))
                loss = loss + (weights["gamma_glue"] * per_sample_norm(
                    z0 - ldm.encode(glued, hp["encoder_sample"], enc_gen))).sum()
        grad = torch.autograd.grad(loss, z_t)[0] if z_t.requires_grad else torch.zeros_like(z)

        if hp["record_every"] and (i % hp["record_every"] == 0 or i == len(timesteps) - 1):
            traj["step"].append(i)
            traj["t"].append(int(t))
            now = {"off_range": off_range_ratio(ldm, z0.detach()).cpu()}
            if C_true is not None:
                now.update(prompt_cos=_cos(prompt, C_true).cpu(), null_cos=_cos(C_null, C_true).cpu())
            for k, per_image in now.items():
                records[k].append(per_image)
                traj[k].append(per_image.mean().item())

        # 3. pixel proximal step + encoder projection, every τ steps
        # (τ and λ may be per-image tensors [B]: a projection step where i is a multiple of that image's τ)
        z_star = z0.detach()
        project = (i % tau == 0) if tau.dim() > 0 else torch.full((B,), bool(i % int(tau) == 0), device=device)
        if hp["projection"] and bool(project.any()) and i < len(timesteps) - 1:
            with torch.no_grad():
                x_star = proximal(y, operator, x0.detach(), lam, hp["cg_iters"])
                z_star = torch.where(project.view(-1, 1, 1, 1), ldm.encode(x_star), z_star)
                enc += 1

        # 4.–5. DDIM step from the (projected) ẑ₀, then the latent DPS step
        z = a_prev.sqrt() * z_star + (1 - a_prev).sqrt() * eps.detach() - grad

    return Solution(x=x0.detach().clamp(-1, 1).cpu(), z0=z0.detach().cpu(), prompt=prompt.cpu(), nfe=nfe,
                    decoder_calls=dec, encoder_calls=enc,
                    wall_s=time.perf_counter() - start, trajectory=traj,
                    per_image={k: torch.stack(v).double() for k, v in records.items() if v})
