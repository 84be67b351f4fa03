"""What the two premise knobs share: run arms at each knob point and write the knob samples
(`shared.samples.knob`: each point holds a fold sample, paired by fold across points) of every arm's
c-index and of MMP-Trans minus each other arm, with the table of means and corrected intervals."""
from __future__ import annotations

import pandas as pd

from shared.samples import gap, knob, sample

from .. import factorial
from ..data import make_cohort
from .arms import fold_scores


def sweep(run, table: str, name: str, points: list, arms: list, data_for_point, label: str) -> dict:
    """Arms on the cohort of every knob point (`data_for_point(point)` → the `data` section); the
    knob `name`, the table `table`."""
    cfg, seed = run.cfg, run.seed
    if cfg.data.source != "synthetic":   # a real cohort has no knob to turn
        run.save_table(pd.DataFrame([{"knob": name, "note": "skipped: the knob turns the synthetic generator"}]), table)
        return {"skipped": True, "reason": f"the {name} knob turns the synthetic generator (data.source: synthetic)"}
    if "mmp_trans" not in arms:
        raise ValueError(f"knobs: the {name} arms need mmp_trans, got {arms}")
    per_point, shares = [], []
    for p in points:
        cohort = make_cohort(data_for_point(p), seed)
        scores, ratio = fold_scores(cohort, cfg, seed, arms)
        per_point.append({arm: sample(v, "fold", test_train_ratio=ratio) for arm, v in scores.items()})
        shares.append(cohort.coefficients["pi_share"])
    out = {"knob": name, "points": [float(p) for p in points], "arms": list(arms), "pi_share": shares,
           "cindex": {arm: knob(name, points, [pp[arm] for pp in per_point]) for arm in arms},
           "trans_minus": {arm: knob(name, points, [gap(pp["mmp_trans"], pp[arm]) for pp in per_point])
                           for arm in arms if arm != "mmp_trans"}}
    rows = []
    for j, p in enumerate(points):
        row = {label: p}
        for arm in arms:
            row[arm] = per_point[j][arm]["mean"]
        for arm, k in out["trans_minus"].items():
            s = k["samples"][j]
            lo, hi = factorial.interval(s)
            row[f"MMP-Trans − {arm} [90%, corrected]"] = (f"{s['mean']:+.3f} [{lo:+.3f}, {hi:+.3f}], "
                                                          f"{sum(v > 0 for v in s['values'])}/{s['n']} folds > 0")
        rows.append(row)
    run.save_table(pd.DataFrame(rows), table, floatfmt=".3f")
    return out
