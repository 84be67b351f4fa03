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
  metrics): arithmetic on configured sizes is `accounting`, not a reproduced result.
The swap test is run on the data's raw interval whatever n is, so it works on one-seed smoke metrics,
except on a tie below MIN_UNITS units (metric equal to ref on every unit): there the swap only shows
that two numbers met, which another CPU's rounding can undo, and the ledger decides nothing on so few
units (a structural tie still shows at tiny, where the units are enough).
This module reads the ledger's evidence (`shared.claims_evidence`); the ledger imports the audit,
never the other way round.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from .claims_evidence import FAIL, MIN_UNITS, PASS, decide, gather, is_configured, lookup
from .claims_spec import ClaimsError, is_knob_test, load_claims
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


def audit_files(claim_files: list[Path], results_dir: Path) -> tuple[dict[str, list[str]], list[str]]:
    """({claim id: findings}, [ids whose metric or ref is missing, so only partly audited]) over
    every claims file, against `results_dir/<paper>/metrics.json`."""
    flagged, unseen = {}, []
    for path in sorted(claim_files):
        for entry in load_claims(path):
            metrics_path = Path(results_dir) / entry["paper"] / "metrics.json"
            metrics = read_json(metrics_path) if metrics_path.is_file() else None
            findings = audit_claim(entry, metrics)
            if findings:
                flagged[entry["id"]] = findings
            inner = entry["test"].get("holds_from", entry["test"])
            keys = [entry["metric"], *([inner["ref"]] if "ref" in inner else [])]
            try:
                [lookup(metrics or {}, k) for k in keys]
            except KeyError:
                unseen.append(entry["id"])
    return flagged, unseen
