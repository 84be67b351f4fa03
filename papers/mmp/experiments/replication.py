"""The comparisons over cohorts: the synthetic cohort is a trained component of every comparison
(its draw decides which arm wins), so it is the outer unit.

Cohort 0 is the workflow's own (seed `run.seed`: the `cindex_<arm>` experiments, read from their
metrics files); each further seed of `replication.cohort_seeds` draws a new cohort and runs the arms of
`replication.arms` on its 5 site-disjoint folds exactly as `cindex_<arm>` does at that seed (prototypes
and tokens once per fold, shared by the arms). Each arm's c-index is a grouped sample (one value per
fold, grouped by cohort), so the ledger decides on the cohort means. A real cohort (`data.source:
tcga`) is one cohort: its arms' fold samples are kept as they are (folds of one cohort, corrected
interval).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from shared.intervals import t_interval
from shared.samples import gap, sample


def replication(run) -> dict:
    from shared.io import read_json

    from ..data import make_cohort, site_folds
    from .arms import ARM_NAMES, fit_predict, prepare_fold
    from ..metrics import cindex

    cfg = run.cfg
    arms = list(cfg.replication.arms)
    unknown = [a for a in arms if a not in ARM_NAMES or a in ("prototype_cox", "mmp_trans_std_pi")]
    if unknown or "mmp_trans" not in arms:
        raise ValueError(f"replication.arms: {unknown} cannot be replicated here; the list needs mmp_trans")
    parts = {arm: read_json(run.out / "metrics" / f"cindex_{arm}.json") for arm in arms}
    if cfg.data.source != "synthetic":      # one real cohort: its folds, as the arms wrote them
        out = {"cohorts": ["real"], "cindex": {arm: parts[arm]["cindex"] for arm in arms}}
    else:
        seeds = [int(s) for s in cfg.replication.cohort_seeds]
        if seeds[0] != run.seed:
            raise ValueError(f"replication.cohort_seeds must start with the run's seed {run.seed} (the workflow's "
                             f"own cohort, read from the cindex_<arm> metrics), got {seeds}")
        values = {arm: list(parts[arm]["cindex"]["values"]) for arm in arms}
        groups = {arm: [seeds[0]] * len(values[arm]) for arm in arms}
        for seed in seeds[1:]:
            cohort = make_cohort(cfg.data, seed)
            folds = site_folds(cohort.site, cfg.eval.n_folds)
            for fold, (tr, te) in enumerate(folds):
                fd = prepare_fold(cohort, tr, cfg, seed, fold, standardize_pi=False)
                for arm in arms:
                    if arm == "full_transformer" and fold >= cfg.eval.transformer_folds:
                        continue
                    _, risk = fit_predict(arm, cfg, cohort, fd, tr, te, seed, fold)
                    values[arm].append(cindex(cohort.time[te], cohort.event[te], risk))
                    groups[arm].append(seed)
        out = {"cohorts": seeds,
               "cindex": {arm: sample(values[arm], "fold", groups=groups[arm], group_unit="cohort") for arm in arms}}
    trans = out["cindex"]["mmp_trans"]
    out["trans_minus"] = {arm: gap(trans, s) for arm, s in out["cindex"].items()
                          if arm != "mmp_trans" and len(s["values"]) == len(trans["values"])
                          and s.get("groups") == trans.get("groups")}
    run.save_table(replication_table(out, arms), "replication")
    return out


def cohort_means(s: dict) -> list[tuple]:
    """[(cohort, mean over its folds)] in first-seen order (a sample without groups is one cohort)."""
    groups = s.get("groups") or ["real"] * len(s["values"])
    labels = list(dict.fromkeys(groups))
    v = np.asarray(s["values"])
    g = np.asarray(groups, dtype=object)
    return [(c, float(v[g == c].mean())) for c in labels]


def replication_table(out: dict, arms: list) -> pd.DataFrame:
    rows = []
    for arm in arms:
        s = out["cindex"][arm]
        means = cohort_means(s)
        row = {"arm": arm, **{f"cohort {c}": m for c, m in means}}
        row["mean over cohorts"] = float(np.mean([m for _, m in means]))
        g = out["trans_minus"].get(arm)
        if g is not None:
            gm = [m for _, m in cohort_means(g)]
            lo, hi = t_interval(gm) if len(gm) > 1 else (float("nan"), float("nan"))
            row["MMP-Trans − arm, per cohort"] = " ".join(f"{m:+.3f}" for m in gm)
            row["mean [90%, t over cohorts]"] = f"{np.mean(gm):+.3f} [{lo:+.3f}, {hi:+.3f}]"
        rows.append(row)
    return pd.DataFrame(rows).round(3)
