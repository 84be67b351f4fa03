"""The claims file format: reading and checking a paper's `claims.yaml`, and what each test means.

One entry::

    - id: mmp.trans_vs_abmil                    # unique, prefixed with the paper
      kind: paper                               # paper | floor | gate | accounting | diagnostic
      claim: "MMP-Trans outperforms ABMIL"      # the paper's words
      paper_value: null                         # the paper's number, or null
      metric: cindex.mmp_trans                  # dotted key path in results/<profile>/<paper>/metrics.json
      test: {op: ">=", ref: cindex.abmil}       # see below
      profiles: [tiny, full]                    # where the claim is checked (default: tiny, full)
      floors: [mmp.trans_beats_mean_floor]      # optional: floor (or gate) claims this claim needs
      guards: prior                             # a gate only: every claim of the file over this unit needs it
      robust_over: {knob: pi_share, metric: sweeps.pi_share.mmp_trans, ref: sweeps.pi_share.abmil}
      primary: true                             # a paper claim only; at most MAX_PRIMARY per paper
      why: "the mechanism against the strongest reference without it"   # a primary's, or a floor's, reason
      paper_effect: 0.04                        # the paper's value of the decided quantity, for --power

**Primary claims.** A paper marks at most MAX_PRIMARY paper claims `primary: true`, each with a
one-line `why:`, before the run that decides them; they are decided under Holm within the paper, the
other paper claims under Benjamini–Hochberg across the ledger (`shared.claims_multiplicity`). A
floor's `why:` says why it bears on the claims that name it (the audit refuses a floor without one).

**Kinds.** `paper`: what the paper claims (the only kind the summaries count as reproduced or not).
`floor`: the method beats a trivial or classical arm. `gate`: the set-up works (a prior follows its
captions, a kernel matches its reference). `accounting`: arithmetic on configured sizes (FLOP and
byte ratios, compression). `diagnostic`: reported, never counted. The old `floor: true` reads as
`kind: floor`.

**Point tests.** `op` is `>=`, `<=`, `>`, `<`, `between` (value: [lo, hi]) or `within`
(|metric − target| <= value). The right-hand side is a constant (`value`, or `target` for within) or
another metric (`ref`, times an optional `factor`).

**Knob tests** (the metric is a knob sample, `shared.samples.knob`):
- `{trend: increasing | decreasing}`: the slope of each replicate's regression on the knob (paired
  across knob points), decided by the interval of the slopes; an optional `ref` knob is subtracted
  point by point first;
- `{holds_from: {op: ">=", value: -2}, from: 0.25}`: the point test (which may have a `ref`) at every
  knob point; PASS when it passes at every point from `from` (default: the first point) on, FAIL when
  it fails at one of them after Holm across those points; the note names the first knob value from
  which it holds, or "nowhere", and the failing point's interval.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping

import yaml

ALL_OPS = (">=", "<=", ">", "<", "between", "within")
KINDS = ("paper", "floor", "gate", "accounting", "diagnostic")
TRENDS = ("increasing", "decreasing")
REQUIRED = ("id", "claim", "metric", "test")
GUARDED_UNITS = ("prior", "base", "cohort", "seed")   # the trained components a gate can guard (`guards:`)
MAX_PRIMARY = 3


class ClaimsError(ValueError):
    """A malformed claims file, or a comparison the data cannot pair."""


def _check_point_test(test: Mapping, where: str) -> None:
    if not isinstance(test, Mapping) or test.get("op") not in ALL_OPS:
        raise ClaimsError(f"{where} has test {test!r}; op must be one of {list(ALL_OPS)}")
    if test["op"] == "within":
        if "value" not in test or ("ref" in test) == ("target" in test):
            raise ClaimsError(f"{where}: 'within' needs value (tolerance) and one of ref or target")
    elif ("value" in test) == ("ref" in test):
        raise ClaimsError(f"{where}: give exactly one of test.value or test.ref")
    if test["op"] == "between" and (not isinstance(test.get("value"), list) or len(test["value"]) != 2):
        raise ClaimsError(f"{where}: 'between' needs value: [lo, hi]")


def is_knob_test(test: Mapping) -> bool:
    return "trend" in test or "holds_from" in test


def _check_test(test: Mapping, where: str) -> None:
    if not isinstance(test, Mapping):
        raise ClaimsError(f"{where} has test {test!r}")
    forms = [k for k in ("op", "trend", "holds_from") if k in test]
    if len(forms) != 1:
        raise ClaimsError(f"{where}: a test has exactly one of op (a point test), trend or holds_from (knob tests)")
    if "trend" in test and test["trend"] not in TRENDS:
        raise ClaimsError(f"{where}: trend must be one of {list(TRENDS)}, got {test['trend']!r}")
    if "holds_from" in test:
        _check_point_test(test["holds_from"], f"{where} (holds_from)")
    if "op" in test:
        _check_point_test(test, where)


def load_claims(path: str | Path) -> list[dict]:
    """Read and validate a claims file; the paper name is the folder's name."""
    path = Path(path)
    entries = yaml.safe_load(path.read_text()) or []
    if not isinstance(entries, list):
        raise ClaimsError(f"{path}: expected a list of claims, got {type(entries).__name__}")
    seen = set()
    for i, entry in enumerate(entries):
        missing = [k for k in REQUIRED if k not in entry]
        if missing:
            raise ClaimsError(f"{path}: claim #{i} lacks {missing}; required keys: {list(REQUIRED)}")
        cid = entry["id"]
        _check_test(entry["test"], f"{path}: claim {cid!r}")
        if cid in seen:
            raise ClaimsError(f"{path}: duplicate claim id {cid!r}")
        seen.add(cid)
        if entry.pop("floor", False):
            if entry.get("kind", "floor") != "floor":
                raise ClaimsError(f"{path}: claim {cid!r} says floor: true and kind: {entry['kind']}")
            entry["kind"] = "floor"
        entry.setdefault("kind", "paper")
        if entry["kind"] not in KINDS:
            raise ClaimsError(f"{path}: claim {cid!r} has kind {entry['kind']!r}; kinds: {list(KINDS)}")
        if entry.get("guards") is not None and (entry["kind"] != "gate" or entry["guards"] not in GUARDED_UNITS):
            raise ClaimsError(f"{path}: claim {cid!r}: guards is for a gate, naming one of {list(GUARDED_UNITS)}")
        robust = entry.get("robust_over")
        if robust is not None:
            if not isinstance(robust, Mapping) or not {"knob", "metric"} <= set(robust):
                raise ClaimsError(f"{path}: claim {cid!r}: robust_over needs knob and metric (and ref for a ref test)")
            if ("ref" in entry["test"]) != ("ref" in robust):
                raise ClaimsError(f"{path}: claim {cid!r}: robust_over gives a ref exactly when the test does")
        if entry.get("primary"):
            if entry["kind"] != "paper" or not entry.get("why"):
                raise ClaimsError(f"{path}: claim {cid!r}: primary is for a paper claim, with a one-line why:")
        if entry.get("paper_effect") is not None and not isinstance(entry["paper_effect"], (int, float)):
            raise ClaimsError(f"{path}: claim {cid!r}: paper_effect is a number (the paper's decided quantity)")
        entry.setdefault("paper", path.parent.name)
        entry.setdefault("profiles", ["tiny", "full"])
        entry.setdefault("paper_value", None)
        entry.setdefault("floors", [])
    primaries = [e["id"] for e in entries if e.get("primary")]
    if len(primaries) > MAX_PRIMARY:
        raise ClaimsError(f"{path}: {len(primaries)} primary claims ({', '.join(primaries)}); at most {MAX_PRIMARY}")
    floor_ids = {e["id"] for e in entries if e["kind"] in ("floor", "gate")}
    for entry in entries:
        unknown = [f for f in entry["floors"] if f not in floor_ids]
        if unknown:
            raise ClaimsError(f"{path}: claim {entry['id']!r} names floors {unknown} that are not claims "
                              f"of this file of kind floor or gate")
    return entries


def describe_test(test: Mapping) -> str:
    if "trend" in test:
        return f"{test['trend']} along the knob" + (f" (minus {test['ref']})" if "ref" in test else "")
    if "holds_from" in test:
        start = f" from {test['from']}" if "from" in test else ""
        return f"{describe_test(test['holds_from'])} at every knob point{start}"
    op = test["op"]
    rhs = test.get("ref", test.get("value"))
    if "ref" in test and "factor" in test:
        rhs = f"{test['factor']} x {test['ref']}"
    if op == "between":
        return f"in [{test['value'][0]}, {test['value'][1]}]"
    if op == "within":
        return f"within {test['value']} of {test.get('ref', test.get('target'))}"
    return f"{op} {rhs}"


def region(test: Mapping) -> tuple[float, float, bool, bool]:
    """(lo, hi, lo_strict, hi_strict): the values of the decided quantity that satisfy the test.

    The decided quantity is the metric for a constant test, d = metric − factor·ref for a ref, and the
    slope for a trend.
    """
    if "trend" in test:
        return (0.0, math.inf, True, False) if test["trend"] == "increasing" else (-math.inf, 0.0, False, True)
    if "holds_from" in test:
        return region(test["holds_from"])
    op = test["op"]
    if op == "between":
        lo, hi = (float(v) for v in test["value"])
        return lo, hi, False, False
    if op == "within":
        tol = float(test["value"])
        centre = 0.0 if "ref" in test else float(test["target"])
        return centre - tol, centre + tol, False, False
    c = 0.0 if "ref" in test else float(test["value"])
    return {">=": (c, math.inf, False, False), ">": (c, math.inf, True, False),
            "<=": (-math.inf, c, False, False), "<": (-math.inf, c, False, True)}[op]
