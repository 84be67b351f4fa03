"""The full profile's cost (tools/plan.py) and one real-shape solver step (tools/gpu_smoke.py).

Stable Diffusion 1.5's UNet and VAE are built from their published architecture on the meta device
(no weights), and one forward of each at the configured image size is counted by FlopCounterMode.
A solver step per image costs (papers.p2l.solver): LDPS a UNet forward+backward and a decoder
forward+backward (×3 a forward each); PSLD adds an encoder forward+backward; P2L adds a prompt update
(UNet and decoder forward+backward again) and an encoder forward for the projection. Tuning solves every
grid point on the validation images (experiments.tuning_grid), then every method solves the test images.
"""
from __future__ import annotations

import functools

import torch

from shared.cost_plan import Cost, sd15, sd15_part_costs

TEXT_TOKENS = 77
HBM_PER_STEP = 3       # HBM traffic per solver step ≈ 3 × (saved activations + weights) (stated)
SD_BYTES = 4.3e9       # the fp32 UNet + VAE + CLIP text encoder read from sd_path (stated)
IMAGE_BYTES = 0.4e6    # one 512² PNG of FFHQ (stated)


def build(device="meta"):
    """SD-1.5's UNet and VAE, random weights, frozen (the solver differentiates through them)."""
    return sd15(device)


@functools.lru_cache(maxsize=4)
def part_costs(image_size: int) -> dict:
    return sd15_part_costs(image_size)


def step_flops(method: str, image_size: int, hp: dict | None = None) -> tuple[float, float]:
    """(FLOPs, peak GPU bytes) of one solver step of `method` on one image."""
    parts = part_costs(image_size)
    u, d, e = (parts[k][0] for k in ("unet", "dec", "enc"))
    hp = hp or {}
    base = 3 * (u + d)                                   # ε_θ and D, forward + backward to z_t
    prompt = 3 * (u + d) * int(hp.get("prompt_steps", 0) or 0) if hp.get("prompt_lr") else 0
    glue = 3 * e if hp.get("gamma_glue") else 0
    gml = 3 * (e + d) if hp.get("gamma_gml") else 0
    proj = e / int(hp.get("tau", 1) or 1) if hp.get("projection") else 0
    act = parts["unet"][1] + parts["dec"][1] + (parts["enc"][1] if glue or gml else 0)
    return base + prompt + glue + gml + proj, parts["weights"][1] + act


def _hp(cfg, method: str) -> dict:
    from .solver import hparams_of

    return hparams_of(method, **dict(cfg.hparams.get(method, {}) or {}))


def _grid(cfg, method: str, extra_axes: bool = True) -> int:
    n = len(cfg.tuning.rho)
    if extra_axes:
        for values in (cfg.tuning.get("extra", {}) or {}).get(method, {}).values():
            n *= len(values)
    return n


def _solves(cfg, jobs: list[tuple[str, int, int]], name: str, note: str) -> Cost:
    """Cost of solving (method, images, steps) triples at batch solve.batch_size."""
    size, flops, peak, steps, hbm = int(cfg.image_size), 0.0, 0.0, 0, 0.0
    batch = int(cfg.solve.batch_size)
    for method, images, n_steps in jobs:
        f, m = step_flops(method, size, _hp(cfg, method))
        m *= HALF_BYTES[str(cfg.solve.dtype)]   # weights and saved activations in the prior's dtype
        flops += f * images * n_steps
        peak = max(peak, m * batch)
        hbm += HBM_PER_STEP * m * images * n_steps
        steps += -(-images // batch) * n_steps
    n_images = sum(i for _, i, _ in jobs)
    return Cost(name, "gpu", flops=flops, flops_how="counted", precision=_precision(cfg), steps=steps,
                gpu_mem_gb=peak / 1e9, mem_how="counted", hbm_bytes=hbm, bytes_read=SD_BYTES + n_images * IMAGE_BYTES, note=note)


PIPELINE_PRECISION = {"float32": "32-true", "float16": "16-true", "bfloat16": "bf16-true"}
HALF_BYTES = {"float32": 1.0, "float16": 0.5, "bfloat16": 0.5}   # bytes vs the fp32 count on meta


def _precision(cfg) -> str:
    """The solves' precision: the prior's weight dtype (`solve.dtype`), not the tiny trainings' trainer."""
    return PIPELINE_PRECISION[str(cfg.solve.dtype)]


def job_costs(cfg) -> list[Cost]:
    steps, n_val, n_test = int(cfg.solve.steps), int(cfg.data.n_val), int(cfg.data.n_test) * int(cfg.data.noise_seeds)
    costs = []
    methods = [m for m in cfg.methods if not m.startswith("oracle")]   # full: no captions, no oracle
    for task in cfg.main_tasks:
        jobs = [(m, _grid(cfg, m) * n_val + n_test, steps) for m in methods]
        costs.append(_solves(cfg, jobs, f"main_{task}", "tuning grid on the validation images + the test images"))
    a = cfg.ablation
    n_ab = min(int(a.n), int(cfg.data.n_test))
    variants = ["p2l_prompt_only", "p2l_projection_only", "p2l_glue"] + ["p2l"] * (len(a.K) + len(a.tau))
    jobs = [(m, _grid(cfg, m, False) * n_val + n_ab, steps) for m in variants] + [("ldps", n_ab, steps), ("p2l", n_ab, steps)]
    costs.append(_solves(cfg, jobs, "ablation", "variants tuned on ρ, then the first n test images"))
    chk = cfg.steps_check
    costs.append(_solves(cfg, [(m, min(int(chk.n), n_test), int(chk.steps)) for m in chk.methods], "steps_check",
                         f"the ranking again at {chk.steps} steps"))
    costs.append(Cost("floors", "gpu", flops=len(cfg.main_tasks) * n_test * 5 * 4e9, flops_how="analytic",
                      precision="32-true", gpu_mem_gb=2.0, mem_how="stated",
                      bytes_read=len(cfg.main_tasks) * n_test * IMAGE_BYTES, host_s=600,
                      note="least-squares CG in pixel space; metrics and model loading stated as 10 min"))
    costs.append(Cost("main_table", "cpu", cpu_s=300, cpu_how="stated", note="tables and figures from the metrics"))
    return costs


def probe_precision(cfg) -> str:
    """The precision `probe_step` runs in on CUDA (tools/gpu_smoke.py's CSV)."""
    return _precision(cfg)


def probe_flops(cfg) -> float:
    """FLOPs of one `probe_step` (an LDPS step at the configured batch), for the smoke's measured s/step."""
    return step_flops("ldps", int(cfg.image_size))[0] * int(cfg.solve.batch_size)


def probe_step(cfg, device: str = "cpu"):
    """One LDPS solver step at the configured image size and batch, with random SD-1.5-shaped weights:
    UNet forward, Tweedie, decoder, the data-fidelity norm's gradient to z_t, with the weights in the
    prior's dtype (`solve.dtype` on CUDA, as `load_prior` loads them) and the loss in fp32. Returns a callable."""
    from .experiments.problems import prior_dtype

    dtype = prior_dtype(cfg, device) if torch.device(device).type != "meta" else torch.float32
    unet, vae = (m.to(dtype) for m in build(device))
    lat, b = int(cfg.image_size) // 8, int(cfg.solve.batch_size)
    dev_type = torch.device(device).type
    c = torch.zeros(b, TEXT_TOKENS, 768, device=device)
    y = torch.zeros(b, 3, int(cfg.image_size), int(cfg.image_size), device=device)

    def step():
        z = torch.randn(b, 4, lat, lat, device=device, requires_grad=True) if dev_type != "meta" else \
            torch.empty(b, 4, lat, lat, device=device, requires_grad=True)
        eps = unet(z.to(dtype), torch.tensor([500], device=device), c.to(dtype)).sample.float()
        z0 = (z - 0.5 * eps) / 0.7
        x = vae.decode(z0.to(dtype)).sample
        loss = (y - x.float()).flatten(1).norm(dim=1).sum()
        (g,) = torch.autograd.grad(loss, z)
        return g

    return step
