"""One lr policy for every arm (`tune_lr`): the same grid and budget on a validation concept."""
from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd
import torch

from shared.seeding import derive_seed

from ..train import eval_psnr, train_gan
from .arms import arm_budget, arm_ranks, finetune
from .bases import load_base
from .setup import FT_ARMS, SCRATCH_ARMS, Setup, read_metrics

def lr_grid_scratch(run) -> dict:
    """The lr policy of the fine-tuning arms (`tune_lr`: the same grid and number of evaluations), for the
    two scratch arms: each trains from scratch for `lr_grid.scratch_steps` steps per lr on the validation
    concept `concepts.search[0]` and keeps the lr with the best test PSNR there."""
    setup, cfg = Setup(run), run.cfg
    concept = cfg.concepts.search[0]
    train, test = setup.pairs(concept, "train"), setup.pairs(concept, "test")
    rows, flops = [], [0]

    def score(arm, lr):
        torch.manual_seed(derive_seed(run.seed, "scratch init", arm, concept))
        G = setup.pix2pix() if arm == "pix2pix_scratch" else setup.e2gan()
        h = train_gan(G, setup.discriminator(), train, cfg.lr_grid.scratch_steps,
                      seed=derive_seed(run.seed, "scratch", concept), **setup.train_kwargs(lora=False, lr=lr))
        flops[0] += h["steps"] * h["flops_per_step"]
        setup.log_fit(f"{arm}/{concept}/lr{lr:g}", h)
        return eval_psnr(G, test)

    for arm in SCRATCH_ARMS:
        rows += [{"arm": arm, **r} for r in tune_lr(partial(score, arm), cfg.lr_grid.lrs, cfg.lr_grid.evaluations)]
    return _lr_grid_result(run, rows, SCRATCH_ARMS, "e2gan_lr_grid_scratch", concept, flops[0])


def tune_lr(score, lrs, evaluations: int = 0) -> list[dict]:
    """The lr policy of every arm, with one budget: exactly `evaluations` calls of `score(lr)` (validation
    PSNR after the arm's own training rule) per arm (at least the grid's size). First the grid; then, while
    evaluations remain, one more lr: beyond the best value when it is the lowest or highest tried (the
    edge's ratio to its neighbour again: a best value at an edge extends the grid), else the geometric
    midpoint between the best value and its better neighbour (a finer bracket). The value kept is inside
    what was tried unless the budget ran out at an edge (`at_edge`). Rows {lr, psnr}, in the order tried."""
    lrs = sorted(float(v) for v in lrs)
    rows = [{"lr": lr, "psnr": float(score(lr))} for lr in lrs]
    while len(rows) < evaluations and len(lrs) > 1:
        tried = sorted(r["lr"] for r in rows)
        by_lr = {r["lr"]: r["psnr"] for r in rows}
        best = max(rows, key=lambda r: r["psnr"])["lr"]
        i = tried.index(best)
        if i == len(tried) - 1:
            lr = tried[-1] * tried[-1] / tried[-2]
        elif i == 0:
            lr = tried[0] * tried[0] / tried[1]
        else:
            nb = tried[i - 1] if by_lr[tried[i - 1]] >= by_lr[tried[i + 1]] else tried[i + 1]
            lr = (best * nb) ** 0.5
        lr = float(f"{lr:.3g}")
        if lr in by_lr:   # rounding met a value already tried: nothing left to refine
            break
        rows.append({"lr": lr, "psnr": float(score(lr))})
    return rows


def lr_grid(run) -> dict:
    """The same lr policy (`tune_lr`: the same grid and number of evaluations) for every fine-tuning arm:
    each arm is scored at each lr under its own training rule (`arm_budget`: LoRA arms `finetune.steps`,
    the full fine-tune to its plateau) on the validation concept `concepts.search[0]` (not an evaluated
    one) and keeps the lr with the best test PSNR there. An arm whose ranks equal an earlier arm's (the
    search can keep 1×) trains the same thing: its scores are that arm's, not retrained."""
    setup, cfg = Setup(run), run.cfg
    base = load_base(run, setup, "clustered")
    searched = read_metrics(run, "rank_search")["ranks"]
    concept = cfg.concepts.search[0]
    train, test = setup.pairs(concept, "train"), setup.pairs(concept, "test")
    rows, flops, seen = [], [0], {}

    def score(arm, ranks, lr):
        key = (arm == "full_ft", tuple(sorted((ranks or {}).items())), lr)
        if key not in seen:
            budget = arm_budget(cfg, arm)
            G, h = finetune(setup, base, arm, ranks, train, test, budget.pop("steps"), run.seed, lr=lr,
                            concept=concept, **budget)
            flops[0] += h["steps"] * h["flops_per_step"]
            seen[key] = (eval_psnr(G, test), h["steps"])
        return seen[key][0]

    for arm in FT_ARMS:
        ranks = arm_ranks(setup, arm, run.seed, concept, searched)
        rows += [{"arm": arm, **r} for r in tune_lr(partial(score, arm, ranks), cfg.lr_grid.lrs, cfg.lr_grid.evaluations)]
    return _lr_grid_result(run, rows, FT_ARMS, "e2gan_lr_grid", concept, flops[0])


def _lr_grid_result(run, rows, arms, table, concept, flops) -> dict:
    """Each arm's lr = the value with the best validation PSNR; `at_edge`: it is the lowest or highest
    value the arm tried (not bracketed). The grid is saved as one row per arm ("–": not tried)."""
    df = pd.DataFrame(rows)
    chosen = {arm: float(g.loc[g["psnr"].idxmax(), "lr"]) for arm, g in df.groupby("arm", sort=False)}
    at_edge = {arm: bool(chosen[arm] in (g["lr"].min(), g["lr"].max())) for arm, g in df.groupby("arm", sort=False)}
    wide = df.pivot(index="arm", columns="lr", values="psnr").loc[list(arms)]
    wide.columns = [f"psnr@lr={c:g}" for c in wide.columns]
    wide = wide.apply(lambda col: [f"{v:.4g}" if np.isfinite(v) else "–" for v in col])
    evaluations = {arm: int(len(g)) for arm, g in df.groupby("arm", sort=False)}
    wide["evaluations"] = [evaluations[a] for a in wide.index]
    wide["chosen_lr"] = [f"{chosen[a]:g}" for a in wide.index]
    wide["at_edge"] = [at_edge[a] for a in wide.index]
    run.save_table(wide.reset_index(), table)
    return {"chosen": chosen, "at_edge": at_edge, "n_at_edge": int(sum(at_edge.values())), "concept": concept,
            "evaluations": evaluations, "equal_budget": len(set(evaluations.values())) == 1,
            "train_flops": flops, "grid": rows}


