"""What a verdict rests on: the evidence for one claim, and the rule that decides it.

A metric is a plain number (deterministic: decided `exact`) or one of the forms of
`shared.samples`. Its interval (90 %, two-sided) is chosen by its form:
- a sample of independent units: Student t up to 30 units, a percentile bootstrap above;
- a **grouped** sample: the t-interval on the group means (n = the number of groups: the priors, bases
  or cohorts it rests on), not on the units, whose spread leaves out the variance between groups;
- a sample of **folds**: the corrected resampled t (Nadeau & Bengio, 2003), with the test/train size
  ratio from the sample or 1/(k − 1) for k folds;
- a 0/1 sample alone, or a **count**: the exact Clopper–Pearson interval of the proportion; a count
  whose trials rest on shared trained components (`groups`) is decided on the components: each one's
  share of successes is a unit, under the t-interval.
A comparison (`ref:`) is decided on the paired differences d = x − factor·r: by index, or by
(group, unit within the group) when the samples are grouped. PASS when the whole interval satisfies the
test, FAIL when the whole interval violates it, INCONCLUSIVE otherwise and with fewer than 3 units
(groups), or when a t-interval's units do not vary (SD = 0: a point is not an interval; `degenerate`).
Each evidence keeps the statistic its interval came from (`form`), for its one-sided p-values
(`shared.claims_multiplicity`) and its power (`shared.claims_power`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from .claims_multiplicity import FAMILYWISE, claim_p, holm
from .claims_spec import ClaimsError, region
from .intervals import LEVEL, corrected_t_interval, group_means, mean_interval, proportion_interval, slope
from .samples import is_binary, is_count, is_knob, is_sample

PASS, FAIL, INCONCLUSIVE, UNTESTABLE, NOT_RUN = "PASS", "FAIL", "INCONCLUSIVE", "UNTESTABLE", "NOT RUN"
MIN_UNITS = 3
UNIT_PLURAL = {"seed": "seeds", "fold": "folds", "image": "images", "trial": "trials", "prior": "priors",
               "base": "bases", "cohort": "cohorts"}


@dataclass
class Evidence:
    """What a verdict is decided on: an estimate and its interval, or an exact number."""
    kind: str                        # exact | sample | paired | count | knob
    estimate: float
    lo: float
    hi: float
    n: int | None = None             # the effective n: units, or groups for a grouped sample
    unit: str | None = None          # the unit n counts (the group unit for a grouped sample)
    values: list[float] | None = None
    method: str = ""                 # how the interval was made, for the note
    n_units: int | None = None       # the units under the groups
    knob: dict | None = field(default=None)
    form: str | None = None          # the statistic of the interval: t | bootstrap | binomial (None: no interval)
    units: list[float] | None = None  # the values the interval is of (the group means for a grouped sample)
    sd: float | None = None          # their SD (ddof 1)
    var_factor: float | None = None  # se² = sd²·var_factor: 1/n, or 1/n + n_test/n_train for folds
    successes: int | None = None     # k of a binomial
    p: tuple[float, float] | None = None  # (p_pass, p_fail) where not the form's own (a knob's points)


def degenerate(ev: "Evidence") -> bool:
    """A t-interval whose units all agree (SD = 0, n > 1): [m, m] would decide with certainty."""
    return ev.form in ("t", "bootstrap") and ev.sd is not None and ev.sd <= 1e-12 * max(1.0, abs(ev.estimate))


def plural(n: int, unit: str) -> str:
    return f"{n} {unit if n == 1 else UNIT_PLURAL.get(unit, unit + 's')}"


def fmt(value: Any, signed: bool = False) -> str:
    """A number for the ledger's tables: 4 significant digits, ∞ for infinities, – for none."""
    if value is None:
        return "–"
    if isinstance(value, float):
        if math.isinf(value):
            return "∞" if value > 0 else "−∞"
        return f"{value:+.4g}" if signed else f"{value:.4g}"
    return str(value)


def lookup(metrics: Mapping, key_path: str) -> Any:
    """`a.b.c` -> metrics["a"]["b"]["c"]; KeyError if any part is missing or null (a metric the run
    could not compute, e.g. a gap whose arm has no such column at the full profile: NOT RUN)."""
    node: Any = metrics
    for part in key_path.split("."):
        if not isinstance(node, Mapping) or part not in node or node[part] is None:
            raise KeyError(key_path)
        node = node[part]
    return node


def is_configured(metrics: Mapping, key_path: str) -> bool:
    """True when a node on the path marks the value as computed from configuration alone
    (`"from_config": true`, or a list naming the child on the path)."""
    node: Any = metrics
    for part in key_path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False
        mark = node.get("from_config")
        if mark is True or (isinstance(mark, list) and part in mark):
            return True
        node = node[part]
    return isinstance(node, Mapping) and node.get("from_config") is True


def decide(lo: float, hi: float, test: Mapping) -> str:
    """PASS if [lo, hi] lies inside the test's region, FAIL if wholly outside, else INCONCLUSIVE."""
    rlo, rhi, lo_strict, hi_strict = region(test)
    above_lo = lo > rlo if lo_strict else lo >= rlo
    below_hi = hi < rhi if hi_strict else hi <= rhi
    if above_lo and below_hi:
        return PASS
    misses_low = hi <= rlo if lo_strict else hi < rlo
    misses_high = lo >= rhi if hi_strict else lo > rhi
    return FAIL if (misses_low or misses_high) else INCONCLUSIVE


def point_verdict(ev: "Evidence | None", test: Mapping) -> str:
    """The verdict of one point test on its evidence: INCONCLUSIVE without evidence, with fewer than
    MIN_UNITS units (groups) or with units that do not vary, else by `decide`."""
    if ev is None or (ev.n is not None and ev.n < MIN_UNITS) or degenerate(ev):
        return INCONCLUSIVE
    return decide(ev.lo, ev.hi, test)


def p_values(ev: "Evidence | None", test: Mapping) -> tuple[float, float] | None:
    """(p_pass, p_fail) of a point test, or None where the evidence has no one-sided statistic (exact,
    fewer than MIN_UNITS units, units that do not vary, non-finite values)."""
    if ev is None or ev.form is None or (ev.n or 0) < MIN_UNITS or degenerate(ev):
        return None
    if ev.units is not None and not all(math.isfinite(v) for v in ev.units):
        return None
    return claim_p(ev, test)


def _keys(groups: list) -> list[tuple]:
    """(group, index of the unit within its group) for each value."""
    seen: dict = {}
    keys = []
    for g in groups:
        keys.append((g, seen.get(g, 0)))
        seen[g] = seen.get(g, 0) + 1
    return keys


def _pair(metric_key: str, x: Mapping, ref_key: str, r: Mapping, factor: float) -> dict:
    """The paired-difference sample of two samples (by index, or by (group, unit) when grouped)."""
    if x["unit"] != r["unit"]:
        raise ClaimsError(f"cannot pair {metric_key!r} ({x['unit']}s) with {ref_key!r} ({r['unit']}s): "
                          "a comparison needs the same unit")
    if ("groups" in x) != ("groups" in r):
        raise ClaimsError(f"cannot pair {metric_key!r} with {ref_key!r}: one is grouped, the other is not")
    out = {"unit": x["unit"]}
    if "groups" in x:
        if x["group_unit"] != r["group_unit"]:
            raise ClaimsError(f"cannot pair {metric_key!r} ({x['group_unit']}s) with {ref_key!r} ({r['group_unit']}s)")
        kx, kr = _keys(x["groups"]), _keys(r["groups"])
        if set(kx) != set(kr):
            raise ClaimsError(f"cannot pair {metric_key!r} with {ref_key!r}: their (group, unit) pairs differ")
        rv = dict(zip(kr, r["values"]))
        out["values"] = [float(v) - factor * float(rv[k]) for k, v in zip(kx, x["values"])]
        out["groups"], out["group_unit"] = list(x["groups"]), x["group_unit"]
    else:
        if len(x["values"]) != len(r["values"]):
            raise ClaimsError(f"cannot pair {metric_key!r} ({plural(len(x['values']), x['unit'])}) with {ref_key!r} "
                              f"({plural(len(r['values']), r['unit'])}): a comparison needs the same unit and n")
        out["values"] = [float(a) - factor * float(b) for a, b in zip(x["values"], r["values"])]
    ratio = x.get("test_train_ratio", r.get("test_train_ratio"))
    if ratio is not None:
        out["test_train_ratio"] = ratio
    return out


def _shift(s: Mapping, c: float) -> dict:
    """A sample minus a constant."""
    return {**s, "values": [float(v) - c for v in s["values"]]}


def interval(s: Mapping, alone: bool = True, level: float = LEVEL) -> Evidence:
    """The interval of a sample's mean by its form (module docstring); `alone`: not a paired difference."""
    values = [float(v) if v is not None else math.nan for v in s["values"]]
    arr = np.asarray(values, dtype=float)
    est = float(arr.mean())
    unit = s["unit"]
    ev = Evidence("sample", est, est, est, len(arr), unit, values, n_units=len(arr))
    if not np.all(np.isfinite(arr)):
        return ev
    if "groups" in s:
        labels, means = group_means(values, s["groups"])
        ev.n, ev.unit = len(labels), s["group_unit"]
        if len(means) > 1:
            ev.lo, ev.hi, how = mean_interval(means, level)
            _keep(ev, means, how, 1.0 / len(means))
        ev.estimate = float(means.mean())
        ev.method = f"t on {plural(len(labels), s['group_unit'])}' means of {plural(len(arr), unit)}"
    elif len(arr) == 1:
        ev.method = "one unit"
    elif alone and is_binary(s):
        ev.lo, ev.hi = proportion_interval(int(arr.sum()), len(arr), level)
        ev.method = "Clopper–Pearson"
        ev.form, ev.successes, ev.units = "binomial", int(arr.sum()), values
    elif unit == "fold":
        ratio = float(s.get("test_train_ratio", 1.0 / (len(arr) - 1)))
        ev.lo, ev.hi = corrected_t_interval(arr, ratio, level)
        ev.method = f"corrected resampled t (Nadeau–Bengio), test/train {ratio:.3g}"
        _keep(ev, arr, "t", 1.0 / len(arr) + ratio)
    else:
        ev.lo, ev.hi, how = mean_interval(arr, level)
        ev.method = how
        _keep(ev, arr, how, 1.0 / len(arr))
    return ev


def _keep(ev: Evidence, units: np.ndarray, how: str, var_factor: float) -> None:
    """Record the t (or bootstrap) statistic the interval was made with."""
    ev.form, ev.units, ev.var_factor = how, [float(v) for v in units], var_factor
    ev.sd = float(np.std(units, ddof=1))


def _numbers(obj: Any, key: str) -> Any:
    if is_sample(obj) or is_count(obj) or is_knob(obj):
        return obj
    if isinstance(obj, Mapping) and "mean" in obj:
        return None  # a summary without its per-unit values
    if isinstance(obj, bool) or not isinstance(obj, (int, float)):
        raise TypeError(f"metric {key!r} is {obj!r}, not a number or a sample")
    return float(obj)


def gather(metric_key: str, metric: Any, ref_key: str | None, ref: Any, factor: float = 1.0,
           level: float = LEVEL) -> Evidence | None:
    """The evidence for one point test: the metric, or the paired differences to its ref. None for a
    summary that lacks per-unit values. ClaimsError when two samples do not pair."""
    x = _numbers(metric, metric_key)
    r = _numbers(ref, ref_key) if ref_key is not None else None
    if x is None or (ref_key is not None and r is None):
        return None
    if is_knob(x) or is_knob(r):
        raise ClaimsError(f"{metric_key!r}: a knob sample needs a knob test (trend or holds_from)")
    if is_count(x) or is_count(r):
        if ref_key is not None:
            raise ClaimsError(f"{metric_key!r}: a count is tested alone, against a constant")
        if "groups" in x:
            return _clustered(x, level)
        lo, hi = proportion_interval(x["successes"], x["trials"], level)
        return Evidence("count", x["successes"] / x["trials"], lo, hi, x["trials"], x["unit"], None,
                        f"Clopper–Pearson, {x['successes']} of {x['trials']}", x["trials"], form="binomial",
                        successes=x["successes"])
    if ref_key is None:
        if isinstance(x, float):
            return Evidence("exact", x, x, x, None, None, [x])
        return interval(x, alone=True, level=level)
    if isinstance(x, float) and isinstance(r, float):
        d = x - factor * r
        return Evidence("exact", d, d, d, None, None, [d])
    if isinstance(r, float):
        diff = _shift(x, factor * r)
    elif isinstance(x, float):
        diff = {**r, "values": [x - factor * float(v) for v in r["values"]]}
        diff.pop("binary", None)
    else:
        diff = _pair(metric_key, x, ref_key, r, factor)
    ev = interval(diff, alone=False, level=level)
    ev.kind = "paired"
    return ev


def _clustered(x: Mapping, level: float) -> Evidence:
    """A count whose trials share trained components: each component's share of successes is a unit."""
    shares = [k / n for _, k, n in x["groups"]]
    ev = interval({"values": shares, "unit": x["group_unit"]}, alone=False, level=level)
    ev.kind, ev.n_units = "count", x["trials"]
    ev.method = (f"t on {plural(len(shares), x['group_unit'])}' shares of {x['successes']} of "
                 f"{x['trials']} {UNIT_PLURAL.get(x['unit'], x['unit'] + 's')}")
    return ev


def knob_evidence(entry: Mapping, metrics: Mapping, level: float = LEVEL) -> tuple[Evidence, str]:
    """(evidence, status) of a knob test (`trend` or `holds_from`) on the metric's knob sample."""
    test = entry["test"]
    metric = lookup(metrics, entry["metric"])
    if not is_knob(metric):
        raise ClaimsError(f"{entry['id']}: a knob test needs a knob sample at {entry['metric']!r}")
    inner = test.get("holds_from", test)
    ref_key = inner.get("ref")
    ref = lookup(metrics, ref_key) if ref_key else None
    if ref is not None and (not is_knob(ref) or ref["points"] != metric["points"]):
        raise ClaimsError(f"{entry['id']}: the ref {ref_key!r} is not a knob sample at the same points")
    factor = float(inner.get("factor", 1.0))
    points = metric["points"]
    pairs = [(s, None if ref is None else ref["samples"][j]) for j, s in enumerate(metric["samples"])]
    name = metric["knob"]
    if "trend" in test:
        series = [s if r is None else _pair(entry["metric"], s, ref_key, r, factor) for s, r in pairs]
        n = len(series[0]["values"])
        slopes = [slope(points, [float(s["values"][i]) for s in series]) for i in range(n)]
        slope_sample = {**{k: v for k, v in series[0].items() if k in ("unit", "groups", "group_unit")},
                        "values": slopes}
        ev = interval(slope_sample, alone=False, level=level)
        ev.kind = "knob"
        ev.method = f"per-{series[0]['unit']} slope on {name}" + (f"; {ev.method}" if ev.method not in ("t", "") else "")
        ev.knob = _curve(name, points, [interval(s, alone=False, level=level) for s in series])
        if ev.n < MIN_UNITS:
            return ev, INCONCLUSIVE
        return ev, decide(ev.lo, ev.hi, test)
    evs = [gather(entry["metric"], s, ref_key, r, factor, level) for s, r in pairs]
    verdicts = [point_verdict(ev, inner) for ev in evs]
    start = float(test.get("from", points[0]))
    in_range = [j for j, p in enumerate(points) if p >= start]
    # a point fails only when Holm over the points in range reaches it
    ps = [p_values(evs[j], inner) or (1.0, 1.0) for j in in_range]
    p_fail = holm([p[1] for p in ps]) if ps else []
    for j, p in zip(in_range, p_fail):
        if verdicts[j] == FAIL and p > FAMILYWISE:
            verdicts[j] = INCONCLUSIVE
    holds = next((points[j] for j in range(len(points)) if all(v == PASS for v in verdicts[j:])), None)
    if any(verdicts[j] == FAIL for j in in_range):
        status = FAIL
    elif in_range and all(verdicts[j] == PASS for j in in_range):
        status = PASS
    else:
        status = INCONCLUSIVE
    rlo, rhi = region(inner)[:2]
    decisive = next((j for j in in_range if verdicts[j] == FAIL), None)
    if decisive is None:
        decisive = next((j for j in in_range if verdicts[j] != PASS), None)
    if decisive is None and in_range:
        decisive = min(in_range, key=lambda j: min(evs[j].lo - rlo, rhi - evs[j].hi))
    ev = evs[decisive if decisive is not None else -1]
    out = Evidence("knob", ev.estimate, ev.lo, ev.hi, ev.n, ev.unit, ev.values, ev.method, ev.n_units,
                   _curve(name, points, evs, verdicts, holds))
    out.knob["decisive_point"] = points[decisive] if decisive is not None else None
    if ps:   # PASS needs every point (the largest p_pass); FAIL one point, after Holm (the smallest)
        out.p = (max(p[0] for p in ps), min(p_fail))
    out.knob["paired"] = ref is not None
    return out, status


def _curve(name: str, points: list, evs: list[Evidence], verdicts: list[str] | None = None,
           holds_from: float | None = None) -> dict:
    curve = {"name": name, "points": list(points), "estimate": [e.estimate for e in evs],
             "lo": [e.lo for e in evs], "hi": [e.hi for e in evs]}
    if verdicts is not None:
        curve["verdicts"] = verdicts
        curve["holds_from"] = holds_from
    return curve
