"""Fine-tuning experiments (`finetune_<arm>`, `knob_finetune_<arm>`): the 2×2 of pre-training {VideoMAE,
EVEREST} × fine-tuning {all tokens, top 60%}, plus the random-60%, ascending, scratch and
frame-selection arms; each fine-tunes once per seed and reports test top-1 with its own pruning.
"""
from __future__ import annotations

import torch

from shared.samples import sample
from shared.seeding import derive_seed

from ..model import VideoClassifier
from ..selection import count
from ..train import evaluate, finetune
from .common import (FINETUNE_ARMS, KNOB_PROCEDURAL_ONLY, at_point, classes, dataset, device_of, initial_autoencoder,
                     knob_points, point_dir, pretrain_dir, schedule, seed_dir, seeds_of, skipped_on_video,
                     snapshot_name)


def finetune_seed(run, arm: str, snapshot: str | None, prune: str, seed: int, subdir: str, cfg=None,
                  point: float | None = None) -> tuple[float, float, int, dict]:
    """(test top-1, final train loss, token count, schedule) of one fine-tune of `arm` at `seed`, under
    `cfg` (default the run's), from the pre-trained weights of the main world or of knob point `point`."""
    cfg = run.cfg if cfg is None else cfg
    source, _ = FINETUNE_ARMS[arm]
    ae = initial_autoencoder(cfg, seed)  # same initial encoder as the pre-training arms
    if source is not None:
        path = pretrain_dir(run, source, seed, point) / f"{snapshot}.pt"
        if not path.is_file():
            experiment = f"pretrain_{source}" if point is None else f"knob_pretrain_{source}"
            raise FileNotFoundError(f"no pre-trained weights at {path}: run the {experiment} experiment first "
                                    f"(with the same `seeds`)")
        ae.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    torch.manual_seed(derive_seed(seed, "head"))
    model = VideoClassifier(ae.encoder, classes(cfg), prune=prune, keep_ratio=cfg.selection.keep_ratio)
    device = device_of(cfg)
    data = dataset(cfg, seed, "finetune")
    plan = schedule(cfg, "finetune", data, who=f"{arm} (seed {seed})")
    losses = finetune(model, data, cfg, seed, run.checkpoint_dir(*[p for p in (subdir, seed_dir(seed)) if p]), device)
    top1 = evaluate(model, dataset(cfg, seed, "test"), cfg.finetune.eval_batch, seed, device)
    tail = max(1, len(losses) // 10)
    return top1, sum(losses[-tail:]) / tail, model.encoder.num_tokens, plan


def finetune_arm(run, arm: str, snapshot: str | None, subdir: str = "", cfg=None, point: float | None = None) -> dict:
    """Fine-tune `arm` from `snapshot` once per seed; top-1 and train loss as samples over seeds."""
    cfg = run.cfg if cfg is None else cfg
    source, prune = FINETUNE_ARMS[arm]
    if arm == "ascending" and cfg.selection.ascending_finetune:
        prune = "bottom"
    if arm == "scratch":
        prune = cfg.selection.scratch_prune
    top1, loss = [], []
    for seed in seeds_of(cfg):
        acc, final_loss, n, plan = finetune_seed(run, arm, snapshot, prune, seed, subdir, cfg, point)
        top1.append(acc)
        loss.append(final_loss)
    return {"top1": sample(top1, "seed"), "pretrained": source, "snapshot": snapshot, "prune": prune,
            "seeds": seeds_of(cfg), "tokens": n if prune == "none" else count(cfg.selection.keep_ratio, n),
            "train_loss_final": sample(loss, "seed"), "schedule": plan}


def run_finetune(run, arm: str) -> dict:
    if (skip := skipped_on_video(run.cfg, arm)) is not None:
        return skip
    return finetune_arm(run, arm, snapshot_name(run.cfg.pretrain.budgets[-1]))


def knob_finetune(run, arm: str) -> dict:
    """Fine-tune `arm` at every point of the static-context knob but the first (the main world's is
    `finetune_<arm>`), from the pre-training of the same point: {point_dir: the fine-tune record}."""
    cfg = run.cfg
    if cfg.data.source != "procedural":
        return {"skipped": True, "reason": KNOB_PROCEDURAL_ONLY}
    snapshot = snapshot_name(cfg.pretrain.budgets[-1])
    return {point_dir(p): finetune_arm(run, arm, snapshot, point_dir(p), at_point(cfg, p), p)
            for p in knob_points(cfg)[1:]}
