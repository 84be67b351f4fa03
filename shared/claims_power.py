"""Power: what a claim's sample could detect, and how many units a claim needs.

For the one-sided 5 % test each interval end makes (`shared.claims_multiplicity`), at 80 % power:
- t (and the bootstrap, approximated by t): the noncentral t, power = P(T' > t_{1−α, n−1}) with
  noncentrality δ / (s·√f), f = 1/n (1/n + n_test/n_train for folds, whose second term more folds of
  one cohort do not shrink);
- binomial: the exact power of the binomial test at the threshold c.
`detectable_effect` is the distance from the threshold an effect needs for 80 % power at the claim's
n and SD; `units_needed` the n at which an effect (the observed one, or the paper's `paper_effect:`)
reaches it. The effect is measured from the end of the test's region nearest to it: power toward a
PASS above it, toward a FAIL below it (a two-sided region counts its nearer end only).
`python -m shared.claims --power RESULTS` sizes each primary claim from a pilot run's SD, at Holm's
first step (α/m for m primaries of the paper).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping

import numpy as np
from scipy import optimize, stats

from .claims_spec import region

POWER = 0.80
ALPHA = 0.05
MAX_UNITS = 10_000


def _t_power(nc: np.ndarray | float, df: np.ndarray | float, alpha: float) -> np.ndarray | float:
    return stats.nct.sf(stats.t.isf(alpha, df), df, nc)


def _binomial_power(n: np.ndarray, c: float, p1: float, alpha: float) -> np.ndarray:
    """Exact power of the one-sided binomial test of p ≤ c (p1 > c) or p ≥ c (p1 < c)."""
    if p1 < c:
        return _binomial_power(n, 1.0 - c, 1.0 - p1, alpha)
    k = stats.binom.isf(alpha, n, c)          # reject when X > k: P(X > k | c) ≤ α
    return stats.binom.sf(k, n, p1)


def threshold(estimate: float, test: Mapping) -> tuple[float, bool]:
    """(c, above): the region's end nearest the estimate, and whether the estimate lies above it."""
    rlo, rhi = region(test)[:2]
    ends = [c for c in (rlo, rhi) if math.isfinite(c)]
    c = min(ends, key=lambda e: abs(estimate - e))
    return c, estimate > c


def detectable_effect(ev, test: Mapping, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """The distance from the threshold detectable with `power` at the evidence's n and SD."""
    if ev.form in ("t", "bootstrap"):
        if not ev.sd:
            return None
        df = ev.n - 1
        nc = optimize.brentq(lambda x: _t_power(x, df, alpha) - power, 0.0, 1e3)
        return float(nc * ev.sd * math.sqrt(ev.var_factor))
    if ev.form == "binomial":
        c, above = threshold(ev.estimate, test)
        room = (1.0 - c) if above else c
        if room <= 0 or _binomial_power(np.asarray([ev.n]), c, c + (room if above else -room), alpha)[0] < power:
            return None
        sign = 1.0 if above else -1.0
        return float(optimize.brentq(
            lambda d: _binomial_power(np.asarray([ev.n]), c, c + sign * d, alpha)[0] - power, 1e-9, room))
    return None


def units_needed(ev, effect: float, test: Mapping, alpha: float = ALPHA, power: float = POWER,
                 centre: float | None = None) -> int | None:
    """The least n at which `effect` (a distance from the threshold) has `power`, with the evidence's SD;
    None when no n up to MAX_UNITS does (or the effect is 0). `centre`: where the effect lies, for a
    binomial (default: the estimate)."""
    if not effect or not math.isfinite(effect):
        return None
    n = np.arange(2, MAX_UNITS + 1)
    if ev.form in ("t", "bootstrap"):
        if not ev.sd:
            return None
        fixed = ev.var_factor - 1.0 / ev.n         # the part more units do not shrink (folds' n_test/n_train)
        nc = abs(effect) / (ev.sd * np.sqrt(1.0 / n + fixed))
        ok = _t_power(nc, n - 1, alpha) >= power
    elif ev.form == "binomial":
        c, above = threshold(ev.estimate if centre is None else centre, test)
        p1 = min(max(c + (abs(effect) if above else -abs(effect)), 0.0), 1.0)
        ok = _binomial_power(n, c, p1, alpha) >= power
    else:
        return None
    return int(n[np.argmax(ok)]) if ok.any() else None


def plan(claim_files, pilot: Path) -> list[str]:
    """One line per primary claim: the n that gives POWER at its `paper_effect:`, with the SD of the
    pilot run under `pilot` (a results folder: smoke, or an earlier record's run), at Holm's first step."""
    from .claims_evidence import gather, knob_evidence, lookup, plural
    from .claims_multiplicity import FAMILYWISE
    from .claims_spec import is_knob_test, load_claims
    from .io import read_json

    lines = []
    for path in sorted(claim_files):
        primaries = [e for e in load_claims(path) if e.get("primary")]
        for e in primaries:
            test, alpha = e["test"], FAMILYWISE / len(primaries)
            inner = test.get("holds_from", test)
            metrics_path = Path(pilot) / e["paper"] / "metrics.json"
            try:
                metrics = read_json(metrics_path)
                if is_knob_test(test):
                    ev = knob_evidence(e, metrics)[0]
                else:
                    ref = lookup(metrics, inner["ref"]) if "ref" in inner else None
                    ev = gather(e["metric"], lookup(metrics, e["metric"]), inner.get("ref"), ref,
                                float(inner.get("factor", 1.0)))
            except (OSError, KeyError):
                lines.append(f"{e['id']}: no pilot value in {metrics_path}")
                continue
            if e.get("paper_effect") is None:
                lines.append(f"{e['id']}: no paper_effect: in its claims.yaml")
                continue
            if ev is None or ev.form is None or (ev.form != "binomial" and not ev.sd):
                lines.append(f"{e['id']}: the pilot gives no SD ({plural(ev.n or 1, ev.unit or 'unit') if ev else 'no sample'})")
                continue
            c, _ = threshold(float(e["paper_effect"]), inner)
            effect = float(e["paper_effect"]) - c
            n = units_needed(ev, effect, inner, alpha=alpha, centre=float(e["paper_effect"]))
            spread = f"SD {ev.sd:.3g}" if ev.sd else f"p = {ev.estimate:.3g}"
            need = f"n ≈ {plural(n, ev.unit)}" if n else f"no n up to {MAX_UNITS} (the effect is within the noise)"
            lines.append(f"{e['id']}: paper effect {e['paper_effect']:g} is {abs(effect):.3g} from the threshold "
                         f"{c:g}; pilot {spread} over {plural(ev.n, ev.unit)}; {POWER:.0%} power at α = {alpha:.3g} "
                         f"(Holm's first step) needs {need}")
    return lines or ["no primary claims (primary: true) in these files"]
