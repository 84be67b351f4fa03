"""Pre-training experiments (`pretrain_<arm>`, `knob_pretrain_<arm>`, `budget_pretrain_<arm>`): VideoMAE
tube masking / EVEREST / ascending selection, and EVEREST on candidate clips with static stretches whose
frame pairs come from information-intensive frame selection or uniform draws (the frame-selection
ablation); the budget curve pre-trains VideoMAE and EVEREST again at every shorter length, each with its
own warm-up and cosine schedule (as the paper's 800- and 3200-epoch runs are separate runs). Weights
are snapshots under checkpoints/; the metrics are the loss curve's ends and the token counts.
"""
from __future__ import annotations

import torch

from shared.samples import sample
from shared.seeding import derive_seed

from ..model import MaskedVideoAutoencoder, build_autoencoder, num_params
from ..recipe import choose_pairs, tube_visible
from ..selection import count
from ..train import pretrain
from .common import (BUDGET_ARMS, KNOB_PROCEDURAL_ONLY, PRETRAIN_ARMS, _key, _procedural, at_point, budget_steps,
                     candidate_frames, dataset, device_of, initial_autoencoder, knob_points, point_dir, schedule,
                     seed_dir, seed_record, seeds_of, skipped_on_video, snapshot_name, with_steps)


def pair_has_motion(moving: torch.Tensor, tubelet: int = 2) -> torch.Tensor:
    """[n, F, H, W] moving-digit pixels -> [n, F/tubelet] bool: the digit's pixels in slice t differ
    from slice t−1 (slice 0 as slice 1, as the scores)."""
    n, f = moving.shape[:2]
    slices = moving.reshape(n, f // tubelet, -1)
    diff = (slices[:, 1:] != slices[:, :-1]).any(-1)
    return torch.cat([diff[:, :1], diff], dim=1)


def motion_pair_fraction(model: MaskedVideoAutoencoder, clips, frames: str, rho_pre: float, seed: int,
                         n_clips: int) -> float:
    """Mean fraction of the chosen τ frame pairs in which the moving digit moves, over `n_clips`
    held-out candidate clips (the selector with `model`'s embedding)."""
    gen = torch.Generator().manual_seed(derive_seed(seed, "frame-eval"))
    video = clips.video[:n_clips]
    with torch.no_grad():
        chosen = choose_pairs(model.eval(), video, frames, rho_pre, gen)            # [n, τ]
    motion = pair_has_motion(clips.moving[:n_clips], model.encoder.tubelet)       # [n, α·τ]
    return float(motion.gather(1, chosen).float().mean())


def pretrain_arm(run, cfg, arm: str, subdir: str = "") -> dict:
    """Pre-train `arm` under `cfg` once per seed (weights under the run's checkpoints/`subdir`/seed<i>)."""
    method, frames = PRETRAIN_ARMS[arm]
    snaps = {max(1, round(b * cfg.pretrain.steps)): snapshot_name(b) for b in cfg.pretrain.budgets}
    first, final, motion_frac, motion_base = [], [], [], []

    def one_seed(seed: int, ckpt_dir) -> dict:
        model = initial_autoencoder(cfg, seed)
        data = dataset(cfg, seed, "pretrain", candidates=frames is not None)
        plan = schedule(cfg, "pretrain", data, who=f"{arm} (seed {seed})")
        losses = pretrain(model, data, method, cfg, seed, ckpt_dir, snaps, device_of(cfg), frames=frames)
        tail = max(1, len(losses) // 10)
        rec = {"first": sum(losses[:tail]) / tail, "final": sum(losses[-tail:]) / tail, "steps": len(losses),
               "schedule": plan}
        if frames is not None:   # held-out candidate clips (the test seed): how often the chosen pairs move
            held_out = _procedural(_key(cfg), derive_seed(seed, "candidate-test-clips"), cfg.frame_selection.n_eval,
                                   candidate_frames(cfg), cfg.frame_selection.rest)
            rec["motion_frac"] = motion_pair_fraction(model.cpu(), held_out, frames, cfg.selection.rho_pre, seed,
                                                      cfg.frame_selection.n_eval)
            rec["motion_base"] = float(pair_has_motion(held_out.moving, model.encoder.tubelet).float().mean())
        return rec

    for seed in seeds_of(cfg):
        ckpt_dir = run.checkpoint_dir(*[p for p in (subdir, seed_dir(seed)) if p])
        rec = seed_record(run, ckpt_dir, cfg, lambda: one_seed(seed, ckpt_dir))   # noqa: B023 - called at once
        first.append(rec["first"])
        final.append(rec["final"])
        if frames is not None:
            motion_frac.append(rec["motion_frac"])
            motion_base.append(rec["motion_base"])
    steps, plan = rec["steps"], rec["schedule"]
    model = build_autoencoder(cfg)   # token counts and parameters (the trained weights are in ckpt_dir)
    enc = model.encoder
    n = enc.num_tokens
    v = tube_visible(enc.slices, enc.positions, cfg.selection.mask_ratio)
    if method == "tube":
        enc_tokens, dec_tokens = v, n
    else:
        enc_tokens = v if cfg.selection.match_visible else count(1 - cfg.selection.mask_ratio, n)
        dec_tokens = count(cfg.selection.rho_pre, n)
    out = {"method": method, "frames": frames, "seeds": seeds_of(cfg), "steps": steps,
           "params": num_params(model), "loss_first": sample(first, "seed"), "loss_final": sample(final, "seed"),
           "encoder_tokens": enc_tokens, "decoder_tokens": dec_tokens, "targets": dec_tokens - enc_tokens,
           "snapshots": sorted(snaps.values()), "schedule": plan}
    if frames is not None:
        out["motion_pair_fraction"] = sample(motion_frac, "seed")
        out["candidate_motion_fraction"] = sample(motion_base, "seed")
    return out


def run_pretrain(run, arm: str) -> dict:
    if (skip := skipped_on_video(run.cfg, arm)) is not None:
        return skip
    return pretrain_arm(run, run.cfg, arm)


def knob_pretrain(run, arm: str) -> dict:
    """Pre-train `arm` at every point of the static-context knob but the first (the main world, whose
    weights `pretrain_<arm>` makes): {point_dir: the pre-training record}."""
    cfg = run.cfg
    if cfg.data.source != "procedural":
        return {"skipped": True, "reason": KNOB_PROCEDURAL_ONLY}
    return {point_dir(p): pretrain_arm(run, at_point(cfg, p), arm, point_dir(p)) for p in knob_points(cfg)[1:]}


def budget_pretrain(run, arm: str) -> dict:
    """Pre-train `arm` (videomae or everest) for every shorter length of the budget curve (the longest is
    `pretrain_<arm>`): {steps<n>: the pre-training record}."""
    if arm not in BUDGET_ARMS:
        raise ValueError(f"budget curve arm {arm!r}; choose one of {BUDGET_ARMS}")
    return {f"steps{n}": pretrain_arm(run, with_steps(run.cfg, n), arm, f"steps{n}")
            for n in budget_steps(run.cfg)[:-1]}
