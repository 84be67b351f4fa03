"""The audit of claims that could not fail (`python -m shared.claims --audit`).

It flags, for each claim against the metrics at hand:
- a comparison (`ref:`, not `within`) whose verdict would not change if metric and ref were swapped:
  "x >= r" that passes both ways only says x == r;
- a constant test on a paired gap (`shared.samples.gap`): the same swap, which negates the gap (a gap
  that is zero on every unit is its own swap and is left to the check below; a test with a margin is
  swapped only on 3 units or more, where the data give an interval to set against the margin);
- a metric (or ref) whose values are identical across all its units: no unit can disagree (except a
  0/1 sample decided alone, whose exact binomial interval is not degenerate: a miss could fail it);
- a claim whose metric and ref are the same key;
- a mean written without its per-unit values, which no interval can be built from;
- a `paper` claim on a value computed from configuration alone (marked `from_config` in the
  metrics): arithmetic on configured sizes is `accounting`, not a reproduced result;
- in a file with paper claims, a gate that guards none (no `guards:`, named in no claim's `floors:`),
  and a floor that does not say `why:` it bears on its claims (`structural_findings`).
Across claims, and only noted (the ledger lists them in claims.md; the audit does not refuse them),
`ledger_findings`:
- two paper claims decided on the same sample in the same direction: one finding counted twice;
- a paper claim or floor that cannot fail here: its interval's near end lies more than CANNOT_FAIL
  margins from the threshold on its side (the margin: a `within` tolerance, a `between` band's width,
  a nonzero constant's size; else the interval's width).
The swap test is run on the data's raw interval whatever n is, so it works on one-seed smoke metrics,
except on a tie below MIN_UNITS units (metric equal to ref on every unit): there the swap only shows
that two numbers met, which another CPU's rounding can undo, and the ledger decides nothing on so few
units (a structural tie still shows at tiny, where the units are enough).
This module reads the ledger's evidence (`shared.claims_evidence`); the ledger imports the audit,
never the other way round.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import math

from .claims_evidence import FAIL, MIN_UNITS, PASS, decide, gather, is_configured, lookup
from .claims_spec import ClaimsError, is_knob_test, load_claims, region
from .io import read_json
from .samples import is_binary, is_gap, is_sample


def _raw_verdict(metric_key: str, metric: Any, ref_key: str | None, ref: Any, test: Mapping) -> str | None:
    try:
        ev = gather(metric_key, metric, ref_key, ref, float(test.get("factor", 1.0)))
    except (ClaimsError, TypeError):
        return None
    return None if ev is None else decide(ev.lo, ev.hi, test)


def _negated(s: Mapping) -> dict:
    return {**s, "values": [-float(v) for v in s["values"]]}


def _tie_below_min_units(metric: Any, ref: Any) -> bool:
    """Two samples equal on each of fewer than MIN_UNITS units: a chance meeting, not a form (an exact
    quantity's tie is a form, and stays audited)."""
    return (is_sample(metric) and is_sample(ref) and len(metric["values"]) < MIN_UNITS
            and [float(v) for v in metric["values"]] == [float(v) for v in ref["values"]])


def audit_claim(entry: Mapping, metrics: Mapping | None) -> list[str]:
    """The reasons this claim could not fail on these metrics (empty when it is sound)."""
    test, findings = entry["test"], []
    ref_key = test.get("ref")
    if ref_key is not None and ref_key == entry["metric"]:
        findings.append("metric and ref are the same key")
    if metrics is None:
        return findings
    keys = [entry["metric"], *([ref_key] if ref_key else [])]
    if entry.get("kind", "paper") == "paper" and any(is_configured(metrics, k) for k in keys):
        findings.append("a paper claim on a value computed from configuration alone (make it kind accounting)")
    if is_knob_test(test):
        return findings
    found = {}
    for key in keys:
        try:
            found[key] = lookup(metrics, key)
        except KeyError:
            continue
        value = found[key]
        exact_binomial = ref_key is None and is_binary(value)
        if is_sample(value) and len(value["values"]) > 1 and len(set(value["values"])) == 1 and not exact_binomial:
            findings.append(f"{key} is identical across all {len(value['values'])} {value['unit']}s")
        elif isinstance(value, Mapping) and "mean" in value and not is_sample(value) and "successes" not in value:
            findings.append(f"{key} is a mean without per-unit values")
    if (ref_key and test["op"] != "within" and ref_key != entry["metric"] and len(found) == 2
            and not _tie_below_min_units(found[entry["metric"]], found[ref_key])):
        forward = _raw_verdict(entry["metric"], found[entry["metric"]], ref_key, found[ref_key], test)
        swapped = _raw_verdict(ref_key, found[ref_key], entry["metric"], found[entry["metric"]], test)
        if forward is not None and forward == swapped and forward in (PASS, FAIL):
            findings.append(f"verdict {forward} is unchanged when metric and ref are swapped")
    metric = found.get(entry["metric"])
    # a gap that is zero on every unit is its own swap: the data cannot tell the arms apart (n > 1 is
    # flagged above as identical across units), so the swap says nothing about the claim's form
    # a margin (a constant other than 0: non-inferiority, superiority by a margin) is audited only on an
    # interval (n >= 3 units): one seed's point inside the margin says nothing of how loose the margin is
    margin = test.get("value") not in (0, 0.0, None)
    if (ref_key is None and test["op"] != "within" and is_gap(metric) and any(v != 0 for v in metric["values"])
            and not (margin and len(metric["values"]) < 3)):
        forward = _raw_verdict(entry["metric"], metric, None, None, test)
        swapped = _raw_verdict(entry["metric"], _negated(metric), None, None, test)
        if forward is not None and forward == swapped and forward in (PASS, FAIL):
            findings.append(f"verdict {forward} is unchanged when the gap's two arms are swapped")
    return findings


CANNOT_FAIL = 10


def structural_findings(entries: Sequence[Mapping]) -> dict[str, list[str]]:
    """{claim id: findings} of one file's roles: gates that guard nothing, floors that do not say why."""
    if not any(e["kind"] == "paper" for e in entries):
        return {}   # a file of checks only (kernels): its gates are its findings
    named = {f for e in entries for f in e.get("floors", [])}
    found: dict[str, list[str]] = {}
    for e in entries:
        if e["kind"] == "gate" and not e.get("guards") and e["id"] not in named:
            found.setdefault(e["id"], []).append(
                "a gate that guards no claim: name it in the floors: of the claims it bears on, give it "
                "guards: <unit>, or make it kind diagnostic")
        if e["kind"] == "floor" and not e.get("why"):
            found.setdefault(e["id"], []).append("a floor without why: (why it bears on the claims naming it)")
    return found


def _evidence(entry: Mapping, metrics: Mapping | None):
    test = entry["test"]
    if metrics is None or is_knob_test(test):
        return None
    try:
        metric = lookup(metrics, entry["metric"])
        ref = lookup(metrics, test["ref"]) if "ref" in test else None
        ev = gather(entry["metric"], metric, test.get("ref"), ref, float(test.get("factor", 1.0)))
    except (KeyError, ClaimsError, TypeError):
        return None
    return ev if ev is not None and ev.form is not None and (ev.n or 0) >= MIN_UNITS else None


def _margin(test: Mapping, lo: float, hi: float) -> float:
    if test["op"] == "within":
        return float(test["value"])
    if test["op"] == "between":
        return float(test["value"][1]) - float(test["value"][0])
    if "value" in test and float(test["value"]) != 0:
        return abs(float(test["value"]))
    return hi - lo


def ledger_findings(entries: Sequence[Mapping], metrics: Mapping[str, Mapping | None]) -> dict[str, list[str]]:
    """{claim id: notes}: duplicate paper claims and claims that cannot fail here (module docstring);
    `metrics`: each paper's metrics."""
    found: dict[str, list[str]] = {}
    seen: dict[tuple, str] = {}
    for e in entries:
        if e["kind"] not in ("paper", "floor"):
            continue
        ev = _evidence(e, metrics.get(e["paper"]))
        if ev is None:
            continue
        rlo, rhi = region(e["test"])[:2]
        if e["kind"] == "paper":
            key = (e["paper"], ev.unit, tuple(round(v, 12) for v in ev.units or ev.values or []),
                   math.isfinite(rlo), math.isfinite(rhi))
            if key in seen:
                found.setdefault(e["id"], []).append(f"decided on the same sample, in the same direction, as {seen[key]}")
            seen.setdefault(key, e["id"])
        room = min(ev.lo - rlo, rhi - ev.hi)
        margin = _margin(e["test"], ev.lo, ev.hi)
        if margin > 0 and room > CANNOT_FAIL * margin:
            found.setdefault(e["id"], []).append(
                f"cannot fail here: its interval's near end is {room / margin:.0f} margins inside the test")
    return found


def audit_files(claim_files: list[Path], results_dir: Path) -> tuple[dict[str, list[str]], list[str]]:
    """({claim id: findings}, [ids whose metric or ref is missing, so only partly audited]) over
    every claims file, against `results_dir/<paper>/metrics.json`."""
    flagged, unseen = {}, []
    for path in sorted(claim_files):
        entries = load_claims(path)
        roles = structural_findings(entries)
        for entry in entries:
            metrics_path = Path(results_dir) / entry["paper"] / "metrics.json"
            metrics = read_json(metrics_path) if metrics_path.is_file() else None
            findings = audit_claim(entry, metrics) + roles.get(entry["id"], [])
            if findings:
                flagged[entry["id"]] = findings
            inner = entry["test"].get("holds_from", entry["test"])
            keys = [entry["metric"], *([inner["ref"]] if "ref" in inner else [])]
            try:
                [lookup(metrics or {}, k) for k in keys]
            except KeyError:
                unseen.append(entry["id"])
    return flagged, unseen
