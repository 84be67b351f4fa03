"""Fine-tuning experiments (`finetune_<arm>`, `knob_finetune_<arm>`, `budget_finetune_<arm>`): the 2×2 of
pre-training {VideoMAE, EVEREST} × fine-tuning {all tokens, top 60%}, plus the random-60%, ascending,
scratch and frame-selection arms; each fine-tunes once per seed and reports test top-1 with its own
pruning.

**One tuning budget for every arm** (`finetune.lr_grid`): each main-world arm fine-tunes its first seed
at every lr of the same grid, scores each on validation clips (`data.n_val`, a stream of their own,
neither training nor test clips), and keeps the lr with the best validation top-1 (a tie goes to the
lower validation NLL, then to the smaller lr). When that lr is the grid's lowest or highest and beats
its neighbour outright (a flat grid has no direction to extend), the first seed also runs at the point
beyond that edge (`finetune.lr_extend`: one round) and the best of all is kept; its other seeds run at
that lr, and their validation top-1 there is recorded too. The seed-0 run at the chosen lr is the arm's
seed-0 result (its training does not depend on the other grid points). The record says the grid, each lr's validation
top-1, the chosen lr and whether it lies on the grid's edge. The knob's and the budget curve's
fine-tunes take the chosen lr of the same arm in the main world (`finetune_<arm>.json`). An empty grid
fine-tunes every arm at `finetune.lr`.

**The frame-selection arms** (`everest_uniform_frames`, `everest_selected_frames`) fine-tune, validate and
test on clips with static stretches (`data.rest` := `frame_selection.finetune_rest`: the moving digit rests
in that fraction of each clip's 4-frame windows), as their pre-training's candidate clips; every other
arm's clips are unchanged.
"""
from __future__ import annotations

import torch

from shared.io import read_json
from shared.samples import sample
from shared.seeding import derive_seed

from ..model import VideoClassifier
from ..selection import count
from ..train import evaluate, finetune, scores
from .common import (FINETUNE_ARMS, FRAME_ARMS, KNOB_PROCEDURAL_ONLY, at_point, budget_steps, classes, dataset,
                     device_of, initial_autoencoder, knob_points, point_dir, pretrain_dir, schedule, seed_dir,
                     seed_record, seeds_of, skipped_on_video, snapshot_name, with_data, with_lr)


def finetune_seed(run, arm: str, snapshot: str | None, prune: str, seed: int, subdir: str, cfg=None,
                  point: float | None = None, steps: int | None = None, val: bool = False,
                  world: str | None = None) -> dict:
    """One fine-tune of `arm` at `seed` under `cfg` (default the run's; its `finetune.lr`), from the
    pre-trained weights of the main world, of knob point `point`, of the `steps`-step pre-training of
    the budget curve, or of the experiment `world` (camera_pan): test top-1 (`top1`), validation top-1
    (`val_top1`, with `val`), final train loss, token count and schedule."""
    cfg = run.cfg if cfg is None else cfg
    ckpt_dir = run.checkpoint_dir(*[p for p in (subdir, seed_dir(seed)) if p])
    return seed_record(run, ckpt_dir, cfg, lambda: _finetune_seed(run, arm, snapshot, prune, seed, ckpt_dir, cfg,
                                                                   point, steps, val, world),
                       "-val" if val else "")


def _finetune_seed(run, arm: str, snapshot: str | None, prune: str, seed: int, ckpt_dir, cfg, point, steps,
                   val: bool, world: str | None = None) -> dict:
    source, _ = FINETUNE_ARMS[arm]
    ae = initial_autoencoder(cfg, seed)  # same initial encoder as the pre-training arms
    if source is not None:
        path = pretrain_dir(run, source, seed, point, steps, world) / f"{snapshot}.pt"
        if not path.is_file():
            experiment = (f"{world} (pre-training) " if world else "pretrain_" if point is None and steps is None
                          else "knob_pretrain_" if steps is None else "budget_pretrain_") + source
            raise FileNotFoundError(f"no pre-trained weights at {path}: run the {experiment} experiment first "
                                    f"(with the same `seeds`)")
        ae.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    torch.manual_seed(derive_seed(seed, "head"))
    model = VideoClassifier(ae.encoder, classes(cfg), prune=prune, keep_ratio=cfg.selection.keep_ratio)
    device = device_of(cfg)
    data = dataset(cfg, seed, "finetune")
    plan = schedule(cfg, "finetune", data, who=f"{arm} (seed {seed}, lr {cfg.finetune.lr:g})")
    losses = finetune(model, data, cfg, seed, ckpt_dir, device)
    out = {"top1": evaluate(model, dataset(cfg, seed, "test"), cfg.finetune.eval_batch, seed, device)}
    if val:
        v = scores(model, dataset(cfg, seed, "val"), cfg.finetune.eval_batch, seed, device)
        out.update(val_top1=v["top1"], val_nll=v["nll"])
    tail = max(1, len(losses) // 10)
    return {**out, "loss": sum(losses[-tail:]) / tail, "tokens": model.encoder.num_tokens, "schedule": plan}


def best_lr(runs: dict[float, dict]) -> float:
    """The lr of the best validation top-1; a tie goes to the lower validation NLL, then to the smaller lr."""
    return min(runs, key=lambda g: (-runs[g]["val_top1"], runs[g].get("val_nll", 0.0), g))


def lr_dir(lr: float) -> str:
    return f"lr{lr:g}"


def finetune_arm(run, arm: str, snapshot: str | None, subdir: str = "", cfg=None, point: float | None = None,
                 lr: float | None = None, steps: int | None = None, world: str | None = None) -> dict:
    """Fine-tune `arm` from `snapshot` once per seed; top-1 and train loss as samples over seeds. With
    `lr` None and a non-empty `finetune.lr_grid`, the lr is chosen on the first seed's validation clips
    (module docstring); otherwise every seed runs at `lr` (or `finetune.lr`)."""
    cfg = run.cfg if cfg is None else cfg
    if arm in FRAME_ARMS and cfg.data.source == "procedural":   # clips with static stretches (module docstring)
        cfg = with_data(cfg, rest=float(cfg.frame_selection.finetune_rest))
    source, prune = FINETUNE_ARMS[arm]
    if arm == "ascending" and cfg.selection.ascending_finetune:
        prune = "bottom"
    if arm == "scratch":
        prune = cfg.selection.scratch_prune
    seeds = seeds_of(cfg)
    grid = [float(x) for x in (cfg.finetune.lr_grid or [])]
    results, tuning = {}, None
    if lr is None and grid:
        def tune(g: float) -> dict:
            return finetune_seed(run, arm, snapshot, prune, seeds[0], "/".join(p for p in (subdir, lr_dir(g)) if p),
                                 with_lr(cfg, g), point, steps, val=True, world=world)

        first = {g: tune(g) for g in grid}
        lr = best_lr(first)
        beyond = [float(x) for x in (cfg.finetune.get("lr_extend") or [])]
        extended = []
        ordered = sorted(grid)
        if len(beyond) == 2 and len(ordered) > 1 and lr in (ordered[0], ordered[-1]):
            inner = ordered[1] if lr == ordered[0] else ordered[-2]
            if first[lr]["val_top1"] > first[inner]["val_top1"]:   # an edge that wins outright: one round beyond
                extended = [beyond[0] if lr == ordered[0] else beyond[1]]
        if extended:
            first[extended[0]] = tune(extended[0])
            lr = best_lr(first)
        tried = sorted(first)
        results[seeds[0]] = first[lr]
        tuning = {"grid": tried, "val_top1": [first[g]["val_top1"] for g in tried],
                  "val_nll": [first[g].get("val_nll") for g in tried], "chosen": lr, "extended": extended,
                  "at_edge": len(tried) > 1 and lr in (tried[0], tried[-1]),
                  "tuned_on": f"seed {seeds[0]}, {cfg.data.n_val} validation clips"}
    elif lr is None:
        lr = float(cfg.finetune.lr)
    for seed in seeds:
        if seed not in results:
            sub = "/".join(p for p in (subdir, lr_dir(lr)) if p) if grid else subdir
            results[seed] = finetune_seed(run, arm, snapshot, prune, seed, sub, with_lr(cfg, lr), point, steps,
                                          val=tuning is not None, world=world)
    if tuning is not None:   # how the first seed's choice serves the others: each seed's validation top-1 at it
        tuning["val_top1_by_seed"] = [results[s]["val_top1"] for s in seeds]
    n = results[seeds[0]]["tokens"]
    return {"top1": sample([results[s]["top1"] for s in seeds], "seed"), "pretrained": source, "snapshot": snapshot,
            "prune": prune, "seeds": seeds, "tokens": n if prune == "none" else count(cfg.selection.keep_ratio, n),
            "train_loss_final": sample([results[s]["loss"] for s in seeds], "seed"),
            "schedule": results[seeds[0]]["schedule"],
            "lr": tuning or {"chosen": lr, "grid": grid, "tuned_on": "the same arm's main-world fine-tune"
                             if grid else "not tuned (finetune.lr_grid empty): finetune.lr"}}


def chosen_lr(run, arm: str) -> float | None:
    """The lr the main world's fine-tune of `arm` chose (None without a grid: `finetune.lr`)."""
    if not run.cfg.finetune.lr_grid:
        return None
    path = run.out / "metrics" / f"finetune_{arm}.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: run the finetune_{arm} experiment first (its lr is chosen there)")
    return float(read_json(path)["lr"]["chosen"])


def run_finetune(run, arm: str) -> dict:
    if (skip := skipped_on_video(run.cfg, arm)) is not None:
        return skip
    return finetune_arm(run, arm, snapshot_name(run.cfg.pretrain.budgets[-1]))


def knob_finetune(run, arm: str) -> dict:
    """Fine-tune `arm` at every point of the static-context knob but the first (the main world's is
    `finetune_<arm>`), from the pre-training of the same point, at the main world's chosen lr:
    {point_dir: the fine-tune record}."""
    cfg = run.cfg
    if cfg.data.source != "procedural":
        return {"skipped": True, "reason": KNOB_PROCEDURAL_ONLY}
    snapshot = snapshot_name(cfg.pretrain.budgets[-1])
    lr = chosen_lr(run, arm)
    return {point_dir(p): finetune_arm(run, arm, snapshot, point_dir(p), at_point(cfg, p), p, lr=lr)
            for p in knob_points(cfg)[1:]}


def budget_finetune(run, arm: str) -> dict:
    """Fine-tune `arm` (videomae: all tokens; everest: top 60%) from each shorter pre-training of the
    budget curve, at the main world's chosen lr: {steps<n>: the fine-tune record}."""
    snapshot = snapshot_name(run.cfg.pretrain.budgets[-1])
    lr = chosen_lr(run, arm)
    return {f"steps{n}": finetune_arm(run, arm, snapshot, f"steps{n}", lr=lr, steps=n)
            for n in budget_steps(run.cfg)[:-1]}

