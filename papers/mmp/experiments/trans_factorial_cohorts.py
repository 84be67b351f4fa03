"""`trans_factorial_cohorts`: tables/trans_factorial_cohorts, the factorial of MMP-Trans on every cohort
of `replication.cohort_seeds` (the outer unit), for the factors of `diagnostics.cohort_factors`.

Cohort 0 is the workflow's own: its cells are read from `trans_diagnostics` (the same folds, seeds
and tokens). Each further cohort trains every cell exactly as `trans_diagnostics` does at that seed
(prototypes and tokens once per fold, π standardised on the training fold, the value residual
switched on the model, `diagnostics.epochs_factor`× epochs). Each effect is a fold sample grouped by cohort, so the ledger decides on the
cohort means."""
from __future__ import annotations

import numpy as np
import pandas as pd

from shared.intervals import t_interval
from shared.samples import sample
from shared.seeding import derive_seed

from .. import factorial
from ..batches import make_batch
from ..data import make_cohort, site_folds
from ..metrics import cindex
from ..train import predict_risk, train_survival
from .arms import build_model, prepare_fold, with_standardized_pi

FACTORS = ("std_pi", "value_residual", "epochs")   # the switches of trans_diagnostics' factorial


def cell_scores(cfg, cohort, seed: int, factors: list) -> tuple[dict, float]:
    """{cell: [c-index per fold]} of the factorial on `cohort`, trained as `trans_diagnostics` trains
    its cells, and the folds' mean test/train size."""
    from shared.training import trainer_options

    t = cfg.train
    folds = site_folds(cohort.site, cfg.eval.n_folds)
    design = factorial.cells(factors)
    scores = {name: [] for name, _ in design}
    for fold, (tr, te) in enumerate(folds):
        raw = prepare_fold(cohort, tr, cfg, seed, fold, standardize_pi=False)
        std = with_standardized_pi(raw, tr) if "std_pi" in factors else None
        for name, on in design:
            data = dict((std if "std_pi" in on else raw)["data"])
            model = build_model("mmp_trans", cfg, cohort, 1, derive_seed(seed, "init", fold))
            model.value_residual = "value_residual" in on or bool(cfg.model.value_residual)
            epochs = t.epochs * cfg.diagnostics.epochs_factor if "epochs" in on else t.epochs
            state = train_survival(model, make_batch(data, tr), cohort.time[tr], cohort.event[tr], loss="cox",
                                   epochs=epochs, batch_size=t.batch_size, lr=t.lr, weight_decay=t.weight_decay,
                                   seed=derive_seed(seed, "train", fold), options=trainer_options(cfg))
            scores[name].append(cindex(cohort.time[te], cohort.event[te], predict_risk(model, data, te, state)))
    return scores, float(np.mean([len(te) / len(tr) for tr, te in folds]))


def trans_factorial_cohorts(run) -> dict:
    from shared.io import read_json

    cfg = run.cfg
    factors = list(cfg.diagnostics.cohort_factors)
    if not set(factors) <= set(FACTORS) or not factors:
        raise ValueError(f"diagnostics.cohort_factors must be a non-empty subset of {list(FACTORS)}, got {factors}")
    if cfg.data.source != "synthetic":
        run.save_table(pd.DataFrame([{"note": "skipped: one real cohort (trans_factorial has its folds)"}]),
                       "trans_factorial_cohorts")
        return {"skipped": True, "reason": "a real cohort is one cohort: tables/trans_factorial has its folds"}
    seeds = [int(s) for s in cfg.replication.cohort_seeds]
    if seeds[0] != run.seed:
        raise ValueError(f"replication.cohort_seeds must start with the run's seed {run.seed}, got {seeds}")
    own = read_json(run.out / "metrics" / "trans_diagnostics.json")
    design = [name for name, _ in factorial.cells(factors)]
    missing = [c for c in design if c not in own["cindex"]]
    if missing:
        raise ValueError(f"trans_diagnostics.json lacks the cells {missing}: diagnostics.factors must include "
                         f"diagnostics.cohort_factors {factors}")
    per_cohort = {seeds[0]: ({c: own["cindex"][c]["values"] for c in design},
                             own["cindex"][design[0]]["test_train_ratio"])}
    for seed in seeds[1:]:
        per_cohort[seed] = cell_scores(cfg, make_cohort(cfg.data, seed), seed, factors)
    effects = {}
    for seed, (scores, ratio) in per_cohort.items():
        for name, eff in factorial.effects(scores, factors, ratio).items():
            effects.setdefault(name.replace(" x ", "_x_"), []).append((seed, eff["values"]))
    out = {"factors": factors, "cohorts": seeds, "cells": design,
           "cindex": {c: sample([v for s in seeds for v in per_cohort[s][0][c]], "fold",
                                groups=[s for s in seeds for _ in per_cohort[s][0][c]], group_unit="cohort")
                      for c in design},
           "effects": {name: sample([v for _, vals in parts for v in vals], "fold",
                                    groups=[s for s, vals in parts for _ in vals], group_unit="cohort")
                       for name, parts in effects.items()}}
    rows = []
    for name, parts in effects.items():
        means = [float(np.mean(vals)) for _, vals in parts]
        lo, hi = t_interval(means) if len(means) > 1 else (float("nan"), float("nan"))
        rows.append({"effect": ("main: " if "_x_" not in name else "interaction: ") + name.replace("_x_", " × "),
                     "per cohort (mean over folds)": " ".join(f"{m:+.3f}" for m in means),
                     "mean [90%, t over cohorts]": f"{np.mean(means):+.3f} [{lo:+.3f}, {hi:+.3f}]",
                     "cohorts > 0": f"{sum(m > 0 for m in means)}/{len(means)}"})
    for c in design:
        means = [float(np.mean(per_cohort[s][0][c])) for s in seeds]
        rows.append({"effect": f"cell c-index: {c}", "per cohort (mean over folds)": " ".join(f"{m:.3f}" for m in means),
                     "mean [90%, t over cohorts]": f"{np.mean(means):.3f}", "cohorts > 0": ""})
    run.save_table(pd.DataFrame(rows), "trans_factorial_cohorts")
    return out
