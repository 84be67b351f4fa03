"""`oracle_ceilings`: linear Cox-PH on the synthetic cohort's true signals (metrics only)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..data import make_cohort, site_folds
from ..metrics import cindex, fold_sample

CEILINGS = {"proportions": "Ceiling: linear Cox on the true proportions p",
            "grade": "Ceiling: linear Cox on the true grade shifts g",
            "genes": "Ceiling: linear Cox on the true pathway activities a",
            "all": "Ceiling: linear Cox on p, g, a and the cross term"}


def ceiling_scores(cohort, folds, penalizer: float) -> dict:
    """Per-fold test c-index of a penalised linear Cox-PH (lifelines) fitted on each training fold
    on the generator's true proportions p, true grade shifts g, true pathway activities a (what the
    genes measure), and all of them with the cross term z(p)_k* a_c*: {block: [c-index per fold]}."""
    from lifelines import CoxPHFitter

    k_star, c_star = cohort.cross_pair
    z_p = (cohort.proportions - cohort.proportions.mean(0)) / cohort.proportions.std(0)
    blocks = {"proportions": z_p[:, :-1],          # p sums to 1: drop one column
              "grade": cohort.grade, "genes": cohort.activity}
    blocks["all"] = np.column_stack([blocks["proportions"], cohort.grade, cohort.activity,
                                     z_p[:, k_star] * cohort.activity[:, c_star]])
    scores = {key: [] for key in blocks}
    for tr, te in folds:
        for key, x in blocks.items():
            df = pd.DataFrame(x).add_prefix("x")
            train = df.iloc[tr].assign(T=cohort.time[tr], E=cohort.event[tr].astype(int))
            cph = CoxPHFitter(penalizer=penalizer).fit(train, duration_col="T", event_col="E")
            scores[key].append(cindex(cohort.time[te], cohort.event[te], cph.predict_log_partial_hazard(df.iloc[te])))
    return scores


def oracle_ceilings(run) -> dict:
    """How much each modality's true signal is worth (`ceiling_scores`), on the test folds that
    every arm uses. These are properties of the cohort, not of any model."""
    cfg, seed = run.cfg, run.seed
    if cfg.data.source != "synthetic":   # real cohorts (full): no true proportions, grades or pathway signals
        return {"skipped": True, "reason": "the ceilings need the synthetic cohort's true signals"}
    cohort = make_cohort(cfg.data, seed)
    folds = site_folds(cohort.site, cfg.eval.n_folds)
    scores = ceiling_scores(cohort, folds, cfg.eval.prototype_cox_penalizer)
    return {"ceilings": {key: fold_sample(v) for key, v in scores.items()}, "n_folds": len(folds),
            "test_sites": [np.unique(cohort.site[te]).tolist() for _, te in folds]}
