"""What the two premise knobs share: run arms at each knob point on every cohort of `knobs.cohort_seeds`
(the outer unit) and write the knob samples (`shared.samples.knob`: each point holds a fold sample
grouped by cohort, paired by (cohort, fold) across points) of every arm's c-index and of MMP-Trans minus
each other arm, with the table of cohort means and the t-interval over them."""
from __future__ import annotations

import numpy as np
import pandas as pd

from shared.intervals import t_interval
from shared.samples import gap, knob, sample

from ..data import make_cohort
from .arms import fold_scores


def point_samples(cfg, data, seeds: list, arms: list) -> tuple[dict, list]:
    """{arm: fold sample grouped by cohort} at one knob point (`data`: that point's data section), and
    the π share each cohort was drawn with."""
    values = {arm: [] for arm in arms}
    groups, ratios, shares = [], [], []
    for seed in seeds:
        cohort = make_cohort(data, seed)
        scores, ratio = fold_scores(cohort, cfg, seed, arms, int(cfg.knobs.n_folds))
        for arm in arms:
            values[arm].extend(scores[arm])
        groups.extend([seed] * len(scores[arms[0]]))
        ratios.append(ratio)
        shares.append(cohort.coefficients["pi_share"])
    ratio = float(np.mean(ratios))
    return ({arm: sample(v, "fold", groups=groups, group_unit="cohort", test_train_ratio=ratio)
             for arm, v in values.items()}, shares)


def cohort_means(s: dict) -> list[float]:
    v, g = np.asarray(s["values"]), np.asarray(s["groups"])
    return [float(v[g == c].mean()) for c in dict.fromkeys(s["groups"])]


def sweep(run, table: str, name: str, points: list, arms: list, data_for_point, label: str) -> dict:
    """Arms on the cohorts of every knob point (`data_for_point(point)` → the `data` section); the
    knob `name`, the table `table`."""
    cfg = run.cfg
    if cfg.data.source != "synthetic":   # a real cohort has no knob to turn
        run.save_table(pd.DataFrame([{"knob": name, "note": "skipped: the knob turns the synthetic generator"}]), table)
        return {"skipped": True, "reason": f"the {name} knob turns the synthetic generator (data.source: synthetic)"}
    if "mmp_trans" not in arms:
        raise ValueError(f"knobs: the {name} arms need mmp_trans, got {arms}")
    seeds = [int(s) for s in cfg.knobs.cohort_seeds]
    per_point, shares = [], []
    for p in points:
        samples, share = point_samples(cfg, data_for_point(p), seeds, arms)
        per_point.append(samples)
        shares.append(float(np.mean(share)))
    out = {"knob": name, "points": [float(p) for p in points], "arms": list(arms), "cohorts": seeds,
           "pi_share": shares,
           "cindex": {arm: knob(name, points, [pp[arm] for pp in per_point]) for arm in arms},
           "trans_minus": {arm: knob(name, points, [gap(pp["mmp_trans"], pp[arm]) for pp in per_point])
                           for arm in arms if arm != "mmp_trans"}}
    rows = []
    for j, p in enumerate(points):
        row = {label: p}
        for arm in arms:
            row[arm] = per_point[j][arm]["mean"]
        for arm, k in out["trans_minus"].items():
            means = cohort_means(k["samples"][j])
            lo, hi = t_interval(means) if len(means) > 1 else (float("nan"), float("nan"))
            row[f"MMP-Trans − {arm} [90%, t over cohorts]"] = (
                f"{np.mean(means):+.3f} [{lo:+.3f}, {hi:+.3f}], per cohort " + " ".join(f"{m:+.3f}" for m in means))
        rows.append(row)
    run.save_table(pd.DataFrame(rows), table, floatfmt=".3f")
    return out
