"""The full profile's cost (tools/plan.py) and one real-shape training step (tools/gpu_smoke.py).

FLOPs and the bytes saved for backward are counted (FlopCounterMode and a saved-tensors hook) on the
meta device: the configured encoder's blocks over the tokens each arm keeps (pre-training: the visible
tokens in the encoder, visible ∪ target in the decoder; fine-tuning: every token or the kept top
share), ×3 for forward + backward, explicit attention as the trainings run it. GPU memory = fp32
weights, grads and AdamW moments + the saved activations of one batch. Video decoding is the host
floor: PyAV in the training process, DECODE_S_PER_CLIP per clip (stated: 1.5–3 s per
step of 24 clips) divided by the loader workers the config sets (`data.workers`, 0 when absent).
"""
from __future__ import annotations

import functools
from dataclasses import replace

import torch

from shared.cost_plan import Cost, autocast, count_step, param_bytes

DECODE_S_PER_CLIP = 0.0625     # one 16-frame clip read and decoded by PyAV on one thread (stated)
CLIP_BYTES = 0.5e6             # an average UCF101 .avi (6.5 GB / 13,320 videos), read once per draw
HBM_PER_STEP = 3               # HBM traffic per step ≈ 3 × (saved activations + weights and AdamW state) (stated)
RULE_CPUS = 16                 # cpus_per_task of the training rules in profiles/slurm
TEST_VIDEOS = 3783             # UCF101 split-1 test list
PRETRAIN_ARMS = ("videomae", "everest", "ascending")
FINETUNE_PRUNE = {"videomae": "none", "videomae_pruned": "top", "everest": "top", "everest_full": "none",
                  "random": "random", "ascending": "top", "scratch": "top"}
SKIPPED_ON_VIDEO = ("everest_uniform_frames", "everest_selected_frames")   # procedural-only arms


def _tokens(cfg) -> int:
    d, m = cfg.data, cfg.model
    return (int(d.frames) // int(m.tubelet)) * (int(d.size) // int(m.patch)) ** 2


@functools.lru_cache(maxsize=16)
def _blocks_cost(dim: int, depth: int, heads: int, batch: int, tokens: int) -> tuple[int, int, int]:
    """(forward FLOPs, saved bytes, parameter bytes with AdamW state) of `depth` blocks on meta."""
    from .model import Block

    with torch.device("meta"):
        blocks = torch.nn.Sequential(*(Block(dim, heads) for _ in range(depth)))
        x = torch.empty(batch, tokens, dim, requires_grad=True)
        flops, saved = count_step(lambda: blocks(x))
    return flops, saved, param_bytes(blocks)


def step_cost(cfg, phase: str, arm: str) -> tuple[float, float]:
    """(FLOPs, peak GPU bytes) of one training step of `arm` in `phase` ("pretrain" | "finetune")."""
    from .selection import count

    m, n = cfg.model, _tokens(cfg)
    b = int(cfg[phase].batch)
    patch_in = int(cfg.data.channels) * int(m.tubelet) * int(m.patch) ** 2
    embed = 2 * b * n * patch_in * int(m.dim)
    if phase == "pretrain":
        vis = count(1 - float(cfg.selection.mask_ratio), n)
        dec_tokens = n if arm == "videomae" else count(float(cfg.selection.rho_pre), n)
        ef, es, ep = _blocks_cost(int(m.dim), int(m.depth), int(m.heads), b, vis)
        df, ds, dp = _blocks_cost(int(m.decoder_dim), int(m.decoder_depth), int(m.decoder_heads), b, dec_tokens)
        return 3 * (ef + df) + embed, ep + dp + es + ds
    kept = n if FINETUNE_PRUNE[arm] == "none" else count(float(cfg.selection.keep_ratio), n)
    ef, es, ep = _blocks_cost(int(m.dim), int(m.depth), int(m.heads), b, kept)
    return 3 * ef + embed, ep + es


def _eval_flops(cfg, arm: str) -> float:
    from .selection import count

    m, n = cfg.model, _tokens(cfg)
    kept = n if FINETUNE_PRUNE[arm] == "none" else count(float(cfg.selection.keep_ratio), n)
    f, _, _ = _blocks_cost(int(m.dim), int(m.depth), int(m.heads), 1, kept)
    return f * TEST_VIDEOS * int(cfg.data.test_segments)


def _workers(cfg) -> int:
    """Decoding processes: `data.workers` (absent: 0, decoding in the training process; -1: the rule's
    CPUs less one, RULE_CPUS stated from profiles/slurm)."""
    w = int(cfg.data.get("workers", 0) or 0)
    return RULE_CPUS - 1 if w < 0 else max(1, w)


def _host(cfg, clips: float) -> float:
    return clips * DECODE_S_PER_CLIP / _workers(cfg)


SEEDED = ("pretrain_", "finetune_", "budget_pretrain_", "budget_finetune_")   # one job per seed at full


def job_costs(cfg) -> list[Cost]:
    """Every job of the full profile: the trainings per seed (`<experiment>_seed`, one SLURM job each) and
    the CPU jobs that merge their seed records (`<experiment>`), then the rest."""
    costs = []
    for c in _costs(cfg, seeds=1):
        if c.experiment.startswith(SEEDED):
            note = c.note.replace("1 seeds in series", "one seed")
            costs.append(replace(c, experiment=f"{c.experiment}_seed",
                                 note=note if note.startswith("one seed") else f"one seed; {note}"))
            costs.append(Cost(c.experiment, "cpu", cpu_s=120, cpu_how="stated",
                              note=f"merges the {len(cfg.seeds)} seed jobs' records: no training"))
        else:
            costs.append(c)
    overlay = next(c for c in _costs(cfg, seeds=len(cfg.seeds)) if c.experiment == "token_overlay")
    return [overlay if c.experiment == "token_overlay" else c for c in costs]


def _costs(cfg, seeds: int) -> list[Cost]:
    prec = str(cfg.trainer.precision)
    costs = []
    how = f"decoding {DECODE_S_PER_CLIP * 1e3:.0f} ms/clip on {_workers(cfg)} process(es) (stated)"
    grid = len(cfg.finetune.get("lr_grid", []) or [])
    extend = grid > 1 and len(cfg.finetune.get("lr_extend", []) or []) == 2
    runs = seeds + max(0, grid - 1) + extend   # an lr grid: the first seed at every lr, and at most one beyond an edge
    for arm in PRETRAIN_ARMS:
        steps, b = int(cfg.pretrain.steps), int(cfg.pretrain.batch)
        f, mem = step_cost(cfg, "pretrain", arm)
        clips = seeds * steps * b
        costs.append(Cost(f"pretrain_{arm}", "gpu", flops=f * steps * seeds, flops_how="counted", precision=prec,
                          steps=steps * seeds, gpu_mem_gb=mem / 1e9, mem_how="counted", bytes_read=clips * CLIP_BYTES,
                          hbm_bytes=HBM_PER_STEP * mem * steps * seeds,
                          host_s=_host(cfg, clips), note=f"{seeds} seeds in series; {how}"))
    for arm, prune in FINETUNE_PRUNE.items():
        steps, b = int(cfg.finetune.steps), int(cfg.finetune.batch)
        f, mem = step_cost(cfg, "finetune", arm)
        clips = runs * (steps * b + TEST_VIDEOS * int(cfg.data.test_segments))
        costs.append(Cost(f"finetune_{arm}", "gpu", flops=runs * (f * steps + _eval_flops(cfg, arm)),
                          flops_how="counted", precision=prec, steps=steps * runs, gpu_mem_gb=mem / 1e9,
                          hbm_bytes=HBM_PER_STEP * mem * steps * runs,
                          mem_how="counted", bytes_read=clips * CLIP_BYTES, host_s=_host(cfg, clips),
                          note=f"{seeds} seeds in series, prune {prune}, test {cfg.data.test_segments} "
                               f"segments/video; {how}"))
    fractions = [float(x) for x in (cfg.get("budget_curve", {}) or {}).get("fractions", [])][:-1]
    for arm in ("videomae", "everest") if fractions else ():   # the budget curve's shorter pre-trainings
        pre = next(c for c in costs if c.experiment == f"pretrain_{arm}")
        fin = next(c for c in costs if c.experiment == f"finetune_{arm if arm == 'videomae' else 'everest'}")
        for name, base, scale in ((f"budget_pretrain_{arm}", pre, sum(fractions)), (f"budget_finetune_{arm}", fin, len(fractions))):
            costs.append(Cost(name, "gpu", flops=base.flops * scale, flops_how=base.flops_how, precision=prec,
                              steps=round(base.steps * scale), gpu_mem_gb=base.gpu_mem_gb, mem_how=base.mem_how,
                              bytes_read=base.bytes_read * scale, host_s=base.host_s * scale,
                              note=f"budget curve at fractions {fractions} of {base.experiment}'s length"))
    for arm in SKIPPED_ON_VIDEO:
        for phase in ("pretrain", "finetune"):
            costs.append(Cost(f"{phase}_{arm}", "gpu", flops_how="stated", precision=prec, host_s=60,
                              note="procedural-only arm: skipped on real videos (writes its record)"))
    for phase in ("knob_pretrain", "knob_finetune"):
        for arm in ("videomae", "everest", "everest_full"):
            costs.append(Cost(f"{phase}_{arm}", "gpu", flops_how="stated", precision=prec, host_s=60,
                              note="static-context knob: procedural only, skipped on real videos"))
    f1, mem1 = step_cost(cfg, "finetune", "videomae")
    eff = int(cfg.efficiency.batch) * int(cfg.efficiency.repeats) / int(cfg.finetune.batch)
    for name in ("efficiency", "efficiency_vit_b"):
        costs.append(Cost(name, "gpu", flops=2 * eff * f1, flops_how="counted", precision=prec, steps=50,
                          gpu_mem_gb=mem1 / 1e9 * int(cfg.efficiency.batch) / int(cfg.finetune.batch), mem_how="counted",
                          host_s=300, note="a few timed steps; model build and start-up stated as 5 min"))
    costs.append(Cost("token_overlay", "gpu", flops=seeds * int(cfg.overlay.n_clips) * f1 / int(cfg.finetune.batch),
                      flops_how="counted", precision=prec, gpu_mem_gb=2.0, mem_how="stated",
                      bytes_read=seeds * int(cfg.overlay.n_clips) * CLIP_BYTES, host_s=300))
    for name in ("label_leak", "accuracy", "static_knob", "camera_pan"):
        costs.append(Cost(name, "cpu", cpu_s=120, cpu_how="stated",
                          note="tables from metrics (label_leak, camera_pan: skipped on video)"))
    return costs


PROBE_PHASES = ("pretrain", "finetune")


def probe_flops(cfg, phase: str = "pretrain") -> float:
    """FLOPs of one `probe_step` (the plan's estimate of it, for the smoke's measured s/step)."""
    return step_cost(cfg, phase, "videomae")[0]


def probe_step(cfg, device: str = "cpu", phase: str = "pretrain"):
    """One training step at the configured clip size, batch and precision, AdamW included: `pretrain`,
    VideoMAE tube masking (the largest decoder); `finetune`, the classifier over every token (the
    largest activation memory). Returns a callable."""
    from .model import VideoClassifier, build_autoencoder, build_encoder
    from .selection import tube_mask

    d, m = cfg.data, cfg.model
    b = int(cfg[phase].batch)
    if phase == "pretrain":
        model = build_autoencoder(cfg).to(device)
    else:
        model = VideoClassifier(build_encoder(cfg), int(d.num_classes), "none").to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    video = torch.rand(b, int(d.channels), int(d.frames), int(d.size), int(d.size), device=device)
    labels = torch.zeros(b, dtype=torch.long, device=device)
    slices, positions = int(d.frames) // int(m.tubelet), (int(d.size) // int(m.patch)) ** 2
    gen = torch.Generator().manual_seed(0)

    def step():
        with autocast(device, str(cfg.trainer.precision)):
            if phase == "pretrain":
                vis, tgt = (t.to(device) for t in tube_mask(b, slices, positions, float(cfg.selection.mask_ratio), gen))
                loss = model(video, vis, tgt)
            else:
                loss = torch.nn.functional.cross_entropy(model(video).float(), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    return step
