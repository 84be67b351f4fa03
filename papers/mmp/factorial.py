"""A 2^k factorial design paired by fold: the cells, and the main effects and interactions.

Every cell switches a subset of k factors on (the empty set is the official default). On each fold,
with y_cell that fold's c-index and s_f(cell) = +1 when factor f is on in the cell, -1 when off, the
effect of a set S of factors is

    E_S = 2^{-(k - |S|)} Σ_cell y_cell Π_{f ∈ S} s_f(cell)

that is, for |S| = 1 the mean over the other factors' settings of (y with f on − y with f off), for
|S| = 2 the mean of the difference of differences (gain of A with B on − gain of A with B off), and
so on up. One E_S per fold makes a fold sample (`shared.samples`), so every effect gets the ledger's
corrected interval over folds.
"""
from __future__ import annotations

from itertools import combinations

from shared.intervals import corrected_t_interval
from shared.samples import sample

SEP = "+"
DEFAULT = "default"


def cell_name(on) -> str:
    """`default` for no factor on, else the factors on, in design order, joined by '+'."""
    return SEP.join(on) if on else DEFAULT


def cells(factors) -> list[tuple[str, frozenset]]:
    """All 2^k cells as (name, the set of factors on), the default first, then by number of factors on."""
    factors = list(factors)
    out = []
    for r in range(len(factors) + 1):
        for on in combinations(factors, r):
            out.append((cell_name(on), frozenset(on)))
    return out


def effect_name(subset) -> str:
    return " x ".join(subset)


def effects(scores: dict, factors, test_train_ratio: float) -> dict:
    """{effect name: fold sample of E_S} for every non-empty subset S of `factors` (main effects,
    then two-way, ... interactions). `scores` maps each cell name of `cells(factors)` to its per-fold
    values, in one fold order."""
    factors = list(factors)
    k = len(factors)
    design = cells(factors)
    missing = [name for name, _ in design if name not in scores]
    if missing:
        raise ValueError(f"the factorial needs every cell of {factors}; missing {missing}")
    n = {len(scores[name]) for name, _ in design}
    if len(n) != 1:
        raise ValueError(f"the cells have different numbers of folds: {sorted(n)}")
    n_folds = n.pop()
    out = {}
    for r in range(1, k + 1):
        for subset in combinations(factors, r):
            per_fold = []
            for i in range(n_folds):
                total = 0.0
                for name, on in design:
                    sign = 1
                    for f in subset:
                        sign *= 1 if f in on else -1
                    total += sign * scores[name][i]
                per_fold.append(total / 2 ** (k - r))
            out[effect_name(subset)] = sample(per_fold, "fold", test_train_ratio=test_train_ratio)
    return out


def interval(s: dict) -> tuple[float, float]:
    """The 90% corrected resampled t-interval of a fold sample's mean (the ledger's rule for folds)."""
    return corrected_t_interval(s["values"], s["test_train_ratio"])
