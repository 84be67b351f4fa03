"""Multiplicity: each claim's one-sided p-value, and the corrections that decide claims as a family.

**p-values.** Each interval of the ledger is 90 % two-sided, so each of its ends is a one-sided 5 %
test. A claim's p-value comes from the same statistic as its interval, against the test's threshold:
- t (a sample, paired differences, group means): t = (m − c)/(s·√(1/n)), n − 1 df;
- corrected resampled t (folds): the same with s·√(1/n + n_test/n_train);
- exact binomial (a count, a 0/1 sample): P(X ≥ k | c) above, P(X ≤ k | c) below (the tests dual to
  the Clopper–Pearson interval);
- percentile bootstrap (above 30 units): the share of resampled means on the far side of c.
`p_pass` tests the claim's region (both ends for a two-sided region: the larger of the two one-sided
p-values, as TOST), `p_fail` the opposite side (the smaller over the region's ends). An end below 5 %
is exactly the interval's end clearing c, so p and interval decide alike claim by claim.

**Families.** Each paper's primary claims (`primary: true`, at most 3) are decided with Holm at
familywise 5 % within the paper; every other paper claim of the ledger is secondary, decided with
Benjamini–Hochberg at q = 0.10 over all of them. A claim enters with the p-value of the direction its
interval decides (the smaller of the two when it decides neither). The correction only withdraws: a
claim keeps its verdict when its adjusted p-value is within the level, and is otherwise INCONCLUSIVE
("passes alone, not after Holm"). Floors, gates, accounting and diagnostics are preconditions and
checks, decided per claim.
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
from scipy import stats

from .claims_spec import region
from .intervals import bootstrap_distribution

FAMILYWISE = 0.05        # Holm over a paper's primary claims
FDR = 0.10               # Benjamini–Hochberg over the ledger's secondary paper claims


def holm(p: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values: p_(i) ↦ max_{j ≤ i} min(1, (m − j + 1)·p_(j))."""
    p = np.asarray(p, dtype=float)
    m = len(p)
    order = np.argsort(p, kind="stable")
    steps = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out = np.empty(m)
    out[order] = np.maximum.accumulate(steps)
    return out.tolist()


def benjamini_hochberg(p: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg q-values: p_(i) ↦ min_{j ≥ i} min(1, m·p_(j)/j)."""
    p = np.asarray(p, dtype=float)
    m = len(p)
    order = np.argsort(p, kind="stable")
    steps = np.minimum(1.0, m * p[order] / np.arange(1, m + 1))
    out = np.empty(m)
    out[order] = np.minimum.accumulate(steps[::-1])[::-1]
    return out.tolist()


def one_sided_p(ev, c: float, above: bool) -> float:
    """The p-value of H0: μ ≤ c against μ > c (`above`), or of H0: μ ≥ c against μ < c, from the
    statistic `ev`'s interval was made with (module docstring)."""
    if ev.form == "binomial":
        k, n = ev.successes, ev.n
        return float(stats.binomtest(k, n, min(max(c, 0.0), 1.0), alternative="greater" if above else "less").pvalue)
    if ev.form == "bootstrap":
        means = bootstrap_distribution(ev.units)
        return float(np.mean(means <= c) if above else np.mean(means >= c))
    se = ev.sd * math.sqrt(ev.var_factor)
    t = (ev.estimate - c) / se
    return float(stats.t.sf(t, ev.n - 1) if above else stats.t.cdf(t, ev.n - 1))


def claim_p(ev, test: Mapping) -> tuple[float, float]:
    """(p_pass, p_fail) of a point test on evidence with a one-sided statistic."""
    rlo, rhi = region(test)[:2]
    passes = [one_sided_p(ev, rlo, True)] if math.isfinite(rlo) else []
    passes += [one_sided_p(ev, rhi, False)] if math.isfinite(rhi) else []
    fails = [one_sided_p(ev, rlo, False)] if math.isfinite(rlo) else []
    fails += [one_sided_p(ev, rhi, True)] if math.isfinite(rhi) else []
    return max(passes), min(fails)


def expected_false(primary_families: int, secondary_decisions: int) -> float:
    """At most how many false decisions the rule expects: FAMILYWISE for each paper's primary family
    (the chance of any false primary decision) plus FDR of the secondary decisions (their expected
    false share)."""
    return FAMILYWISE * primary_families + FDR * secondary_decisions
