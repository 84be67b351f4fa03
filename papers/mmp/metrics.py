"""Evaluation: c-index (scikit-survival), per-fold samples, Kaplan–Meier risk groups (lifelines)."""
from __future__ import annotations

import numpy as np

from shared.samples import sample


def cindex(time, event, risk) -> float:
    """Harrell's c-index with scikit-survival's `concordance_index_censored` (tied_tol 1e-8)."""
    from sksurv.metrics import concordance_index_censored

    return float(concordance_index_censored(np.asarray(event, dtype=bool), np.asarray(time, dtype=float),
                                            np.asarray(risk, dtype=float), tied_tol=1e-8)[0])


def fold_sample(values) -> dict:
    """One value per test fold, in fold order, as a `shared.samples` sample (unit "fold"): fold i of
    one experiment pairs with fold i of another, since every experiment deals the same folds."""
    return sample(values, "fold")


def risk_groups(time, event, risk) -> dict:
    """Median split of risk into low / high groups; the log-rank test between them (lifelines)."""
    from lifelines.statistics import logrank_test

    time, event, risk = np.asarray(time), np.asarray(event, dtype=bool), np.asarray(risk)
    high = risk > np.median(risk)
    test = logrank_test(time[high], time[~high], event[high], event[~high])
    return {"high": high, "p_value": float(test.p_value), "statistic": float(test.test_statistic)}
