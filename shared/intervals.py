"""Confidence intervals for the claims ledger: the 90% two-sided interval of a mean.

Equivalently, each end is a one-sided 95% bound. For n <= 30 units the Student-t interval
mean ± t_{0.95, n-1} · s/√n; above that a seeded percentile bootstrap of the mean (2000 resamples),
both through scipy.stats. A proportion (k hits in n 0/1 units) gets the exact Clopper–Pearson
interval instead (`proportion_interval`), which is not degenerate when k = 0 or k = n.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy import stats

LEVEL = 0.90
T_MAX_N = 30
N_RESAMPLES = 2000
BOOTSTRAP_SEED = 0


def t_interval(values: Sequence[float], level: float = LEVEL) -> tuple[float, float]:
    """Student-t interval of the mean (degenerate [x, x] when all values are equal)."""
    x = np.asarray(values, dtype=float)
    mean, sem = float(x.mean()), float(stats.sem(x)) if len(x) > 1 else 0.0
    if sem == 0.0:
        return mean, mean
    lo, hi = stats.t.interval(level, df=len(x) - 1, loc=mean, scale=sem)
    return float(lo), float(hi)


def _bootstrap(x: np.ndarray, level: float, n_resamples: int, seed: int):
    return stats.bootstrap((x,), np.mean, confidence_level=level, n_resamples=n_resamples,
                           method="percentile", rng=np.random.default_rng(seed))


def bootstrap_interval(values: Sequence[float], level: float = LEVEL, n_resamples: int = N_RESAMPLES,
                       seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean, seeded so the ledger is deterministic."""
    x = np.asarray(values, dtype=float)
    if np.all(x == x[0]):
        return float(x[0]), float(x[0])
    res = _bootstrap(x, level, n_resamples, seed)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def bootstrap_distribution(values: Sequence[float], n_resamples: int = N_RESAMPLES,
                           seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """The resampled means `bootstrap_interval` takes its percentiles of (same seed, same draws)."""
    x = np.asarray(values, dtype=float)
    if np.all(x == x[0]):
        return np.full(n_resamples, float(x[0]))
    return np.asarray(_bootstrap(x, LEVEL, n_resamples, seed).bootstrap_distribution, dtype=float)


def mean_interval(values: Sequence[float], level: float = LEVEL) -> tuple[float, float, str]:
    """(lo, hi, method): the t-interval up to 30 units, the bootstrap above."""
    if len(values) <= T_MAX_N:
        return (*t_interval(values, level), "t")
    return (*bootstrap_interval(values, level), "bootstrap")


def proportion_interval(k: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """Exact (Clopper–Pearson) interval of a binomial proportion k/n: beta quantiles, through
    scipy.stats.binomtest; at k = n its lower end is ((1 − level)/2)^(1/n), not 1."""
    ci = stats.binomtest(int(k), int(n)).proportion_ci(confidence_level=level, method="exact")
    return float(ci.low), float(ci.high)


def corrected_t_interval(values: Sequence[float], test_train_ratio: float,
                         level: float = LEVEL) -> tuple[float, float]:
    """The corrected resampled t-interval of a mean over J cross-validation folds (Nadeau & Bengio,
    2003): folds share training data, so their scores are positively correlated and the plain s²/J
    understates the variance; the correction uses (1/J + n_test/n_train)·s² with J − 1 degrees of
    freedom. For k-fold CV n_test/n_train = 1/(k − 1)."""
    x = np.asarray(values, dtype=float)
    j = len(x)
    mean = float(x.mean())
    var = float(x.var(ddof=1)) if j > 1 else 0.0
    if var == 0.0:
        return mean, mean
    half = float(stats.t.ppf(0.5 + level / 2, df=j - 1)) * float(np.sqrt((1.0 / j + test_train_ratio) * var))
    return mean - half, mean + half


def group_means(values: Sequence[float], groups: Sequence) -> tuple[list, np.ndarray]:
    """(labels in first-seen order, the mean of each group's values)."""
    labels = list(dict.fromkeys(groups))
    x = np.asarray(values, dtype=float)
    g = np.asarray([labels.index(v) for v in groups])
    return labels, np.asarray([x[g == i].mean() for i in range(len(labels))])


def slope(x: Sequence[float], y: Sequence[float]) -> float:
    """The least-squares slope of y on x."""
    return float(stats.linregress(np.asarray(x, dtype=float), np.asarray(y, dtype=float)).slope)
