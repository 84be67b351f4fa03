"""The claims ledger: decide each paper's `claims.yaml` on the evidence in its metrics, for one profile.

A claims file is a YAML list; one entry::

    - id: mmp.trans_vs_abmil                    # unique, prefixed with the paper
      claim: "MMP-Trans outperforms ABMIL"      # the paper's words
      paper_value: null                         # the paper's number, or null
      metric: cindex.mmp_trans                  # dotted key path in results/<profile>/<paper>/metrics.json
      test: {op: ">=", ref: cindex.abmil}       # see below
      profiles: [tiny, full]                    # where the claim is checked (default: tiny, full)
      floors: [mmp.trans_beats_mean_floor]      # optional: floor claims this comparison needs
      floor: true                               # optional: this claim *is* a floor (method vs a trivial arm)

`test.op` is `>=`, `<=`, `>`, `<`, `between` (value: [lo, hi]) or `within` (|metric − target| <= value).
The right-hand side is a constant (`value`, or `target` for within) or another metric (`ref`, times an
optional `factor`).

**Evidence.** A metric is either a sample (`shared.samples.sample`: one value per seed, fold or
image) or a plain number, which is deterministic and decided `exact`. A sample is decided by the 90%
two-sided interval of its mean (`shared.intervals`): PASS when the whole interval satisfies the test,
FAIL when the whole interval violates it, INCONCLUSIVE otherwise, and always INCONCLUSIVE with fewer
than 3 units. A sample of 0/1 outcomes (`sample(..., binary=True)`) tested alone is decided by the
exact Clopper–Pearson interval of its proportion instead. Against a `ref` sample the test is on the
paired differences d_i = x_i − factor·r_i, so both must have the same unit and n; `within` is then an
equivalence test on d (±tolerance).

**Floors.** A comparative claim about a method names the floor claims (`floors:`) that say the
method also beats a trivial arm (measurement only, least squares, random selection, shuffled pairs, a
mean predictor). A PASS whose floors do not all PASS is reported INCONCLUSIVE: a win over a baseline
that loses to a trivial arm is not evidence for the method.

NOT RUN: the metrics file or a key is missing, or the profile is not one the claim is checked at.
`python -m shared.claims --audit` lists claims that could not fail (`shared.claims_audit`).
"""
from __future__ import annotations

import argparse
import math
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import yaml

from .intervals import LEVEL, mean_interval, proportion_interval
from .io import read_json, write_json, write_text
from .samples import is_binary, is_sample

ALL_OPS = (">=", "<=", ">", "<", "between", "within")
REQUIRED = ("id", "claim", "metric", "test")
PASS, FAIL, INCONCLUSIVE, NOT_RUN = "PASS", "FAIL", "INCONCLUSIVE", "NOT RUN"
STATUSES = (PASS, FAIL, INCONCLUSIVE, NOT_RUN)
MIN_UNITS = 3
UNIT_PLURAL = {"seed": "seeds", "fold": "folds", "image": "images"}


class ClaimsError(ValueError):
    """A malformed claims file, or a comparison the data cannot pair."""


@dataclass
class ClaimResult:
    id: str
    paper: str
    claim: str
    paper_value: Any
    metric: str
    reproduced: float | None          # the estimate: the metric's mean (or the paired mean difference)
    test: str
    status: str
    note: str = ""
    profiles: list[str] = field(default_factory=list)
    evidence: str = ""                # "exact", "sample" or "paired"
    lo: float | None = None           # the 90% interval of `reproduced`
    hi: float | None = None
    n: int | None = None
    unit: str | None = None
    region: list[float] | None = None  # [lo, hi] of values that satisfy the test (for the forest plot)
    floors: list[str] = field(default_factory=list)
    floor: bool = False
    audit: list[str] = field(default_factory=list)


@dataclass
class Evidence:
    """What a verdict is decided on: an estimate and its interval, or an exact number."""
    kind: str
    estimate: float
    lo: float
    hi: float
    n: int | None = None
    unit: str | None = None
    values: list[float] | None = None


def lookup(metrics: Mapping, key_path: str) -> Any:
    """`a.b.c` -> metrics["a"]["b"]["c"]; KeyError if any part is missing or null (a metric the run
    could not compute, e.g. a gap whose arm has no such column at the full profile: NOT RUN)."""
    node: Any = metrics
    for part in key_path.split("."):
        if not isinstance(node, Mapping) or part not in node or node[part] is None:
            raise KeyError(key_path)
        node = node[part]
    return node


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
        test, cid = entry["test"], entry["id"]
        if not isinstance(test, Mapping) or test.get("op") not in ALL_OPS:
            raise ClaimsError(f"{path}: claim {cid!r} has test {test!r}; op must be one of {list(ALL_OPS)}")
        if test["op"] == "within":
            if "value" not in test or ("ref" in test) == ("target" in test):
                raise ClaimsError(f"{path}: claim {cid!r}: 'within' needs value (tolerance) and one of ref or target")
        elif ("value" in test) == ("ref" in test):
            raise ClaimsError(f"{path}: claim {cid!r}: give exactly one of test.value or test.ref")
        if test["op"] == "between" and (not isinstance(test.get("value"), list) or len(test["value"]) != 2):
            raise ClaimsError(f"{path}: claim {cid!r}: 'between' needs value: [lo, hi]")
        if cid in seen:
            raise ClaimsError(f"{path}: duplicate claim id {cid!r}")
        seen.add(cid)
        entry.setdefault("paper", path.parent.name)
        entry.setdefault("profiles", ["tiny", "full"])
        entry.setdefault("paper_value", None)
        entry.setdefault("floors", [])
        entry.setdefault("floor", False)
    floor_ids = {e["id"] for e in entries if e["floor"]}
    for entry in entries:
        unknown = [f for f in entry["floors"] if f not in floor_ids]
        if unknown:
            raise ClaimsError(f"{path}: claim {entry['id']!r} names floors {unknown} that are not claims "
                              f"of this file marked `floor: true`")
    return entries


def describe_test(test: Mapping) -> str:
    op = test["op"]
    rhs = test.get("ref", test.get("value"))
    if "ref" in test and "factor" in test:
        rhs = f"{test['factor']} x {test['ref']}"
    if op == "between":
        return f"in [{test['value'][0]}, {test['value'][1]}]"
    if op == "within":
        return f"within {test['value']} of {test.get('ref', test.get('target'))}"
    return f"{op} {rhs}"


def _region(test: Mapping) -> tuple[float, float, bool, bool]:
    """(lo, hi, lo_strict, hi_strict): the values of the decided quantity that satisfy the test.

    The decided quantity is the metric for a constant test, and d = metric − factor·ref for a ref.
    """
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


def decide(lo: float, hi: float, test: Mapping) -> str:
    """PASS if [lo, hi] lies inside the test's region, FAIL if wholly outside, else INCONCLUSIVE."""
    rlo, rhi, lo_strict, hi_strict = _region(test)
    above_lo = lo > rlo if lo_strict else lo >= rlo
    below_hi = hi < rhi if hi_strict else hi <= rhi
    if above_lo and below_hi:
        return PASS
    misses_low = hi <= rlo if lo_strict else hi < rlo
    misses_high = lo >= rhi if hi_strict else lo > rhi
    return FAIL if (misses_low or misses_high) else INCONCLUSIVE


def _values(obj: Any, key: str) -> tuple[list[float] | None, str | None]:
    """(values, unit) of a sample, or ([x], None) of a plain number. TypeError for anything else."""
    if is_sample(obj):
        return [float(v) if v is not None else math.nan for v in obj["values"]], obj["unit"]
    if isinstance(obj, Mapping) and "mean" in obj:
        return None, None  # a summary without its per-unit values
    if isinstance(obj, bool) or not isinstance(obj, (int, float)):
        raise TypeError(f"metric {key!r} is {obj!r}, not a number or a sample")
    return [float(obj)], None


def gather(metric_key: str, metric: Any, ref_key: str | None, ref: Any, factor: float = 1.0,
           level: float = LEVEL) -> Evidence | None:
    """The evidence for one claim: the metric, or the paired differences to its ref. None for a
    summary that lacks per-unit values. ClaimsError when two samples do not pair."""
    x, xu = _values(metric, metric_key)
    if x is None:
        return None
    if ref_key is None:
        values, unit, kind = x, xu, "exact" if xu is None else "sample"
    else:
        r, ru = _values(ref, ref_key)
        if r is None:
            return None
        if xu is not None and ru is not None and (xu != ru or len(x) != len(r)):
            raise ClaimsError(f"cannot pair {metric_key!r} ({len(x)} {xu}s) with {ref_key!r} ({len(r)} {ru}s): "
                              "a comparison needs the same unit and n")
        if xu is None and ru is None:
            values, unit, kind = [x[0] - factor * r[0]], None, "exact"
        else:
            xs = x if xu is not None else x * len(r)
            rs = r if ru is not None else r * len(x)
            values, unit, kind = [a - factor * b for a, b in zip(xs, rs)], xu or ru, "paired"
    arr = np.asarray(values, dtype=float)
    est = float(arr.mean())
    if kind == "exact" or len(arr) == 1 or not np.all(np.isfinite(arr)):
        lo = hi = est
    elif ref_key is None and is_binary(metric):
        lo, hi = proportion_interval(int(arr.sum()), len(arr), level)
    else:
        lo, hi, _ = mean_interval(arr, level)
    return Evidence(kind, est, lo, hi, None if unit is None else len(arr), unit, values)


def _fmt(value: Any, signed: bool = False) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        if math.isinf(value):
            return "∞" if value > 0 else "−∞"
        return f"{value:+.4g}" if signed else f"{value:.4g}"
    return str(value)


def _units(n: int, unit: str) -> str:
    return f"{n} {unit if n == 1 else UNIT_PLURAL.get(unit, unit + 's')}"


def describe_evidence(ev: Evidence) -> str:
    """E.g. `Δ = +0.041 [0.018, 0.063], n=5 folds`, or `exact: 312.3`."""
    name = "x" if ev.kind == "sample" else "Δ"
    if ev.kind == "exact":
        return f"exact: {ev.estimate:.4g}"
    interval = f" [{_fmt(ev.lo)}, {_fmt(ev.hi)}]" if ev.n > 1 else ""
    return f"{name} = {_fmt(ev.estimate, signed=name == 'Δ')}{interval}, n={_units(ev.n, ev.unit)}"


def evaluate_claim(entry: Mapping, metrics: Mapping | None, profile: str) -> ClaimResult:
    """Decide one claim on `metrics` (the paper's metrics.json) at `profile`."""
    test = entry["test"]
    region = _region(test)
    result = ClaimResult(
        id=entry["id"], paper=entry["paper"], claim=entry["claim"], paper_value=entry.get("paper_value"),
        metric=entry["metric"], reproduced=None, test=describe_test(test), status=NOT_RUN,
        profiles=list(entry.get("profiles", ["tiny", "full"])), region=[region[0], region[1]],
        floors=list(entry.get("floors", [])), floor=bool(entry.get("floor", False)),
    )
    if metrics is None:
        result.note = "no metrics file"
        return result
    ref_key = test.get("ref")
    try:
        metric = lookup(metrics, entry["metric"])
        ref = lookup(metrics, ref_key) if ref_key else None
    except KeyError as err:
        result.note = f"metric {err.args[0]!r} missing"
        return result
    ev = gather(entry["metric"], metric, ref_key, ref, float(test.get("factor", 1.0)))
    if ev is None:
        result.status = INCONCLUSIVE if profile in result.profiles else NOT_RUN
        result.note = "a mean without per-unit values: write it with shared.samples.sample"
        return result
    result.reproduced, result.evidence, result.n, result.unit = ev.estimate, ev.kind, ev.n, ev.unit
    if ev.kind != "exact" and ev.n > 1 and all(math.isfinite(v) for v in ev.values):
        result.lo, result.hi = ev.lo, ev.hi
    result.note = describe_evidence(ev)
    if profile not in result.profiles:
        result.note = f"not checked at profile {profile!r} (checked at {result.profiles}); {result.note}"
        return result
    if not all(math.isfinite(v) for v in ev.values):
        result.status, result.note = FAIL, f"metric is NaN or infinite; {result.note}"
        return result
    if ev.kind != "exact" and ev.n < MIN_UNITS:
        result.status = INCONCLUSIVE
        result.note = f"n={ev.n}: needs ≥ {MIN_UNITS} {UNIT_PLURAL.get(ev.unit, ev.unit)}; {result.note}"
        return result
    result.status = decide(ev.lo, ev.hi, test)
    return result


def apply_floors(results: list[ClaimResult]) -> None:
    """A PASS whose floor claims do not all PASS becomes INCONCLUSIVE, with the reason in its note."""
    by_id = {r.id: r for r in results}
    for r in results:
        weak = [f"{f} {by_id[f].status}" for f in r.floors if f in by_id and by_id[f].status != PASS]
        if r.status == PASS and weak:
            r.status = INCONCLUSIVE
            r.note = f"passes alone, but its floor does not ({', '.join(weak)}); {r.note}"


def evaluate(claim_files: list[Path], results_dir: Path, profile: str) -> list[ClaimResult]:
    """Evaluate every claim of every file against `results_dir/<paper>/metrics.json`."""
    from .claims_audit import audit_claim

    results = []
    for path in sorted(claim_files):
        entries = load_claims(path)
        for entry in entries:
            metrics_path = results_dir / entry["paper"] / "metrics.json"
            metrics = read_json(metrics_path) if metrics_path.is_file() else None
            result = evaluate_claim(entry, metrics, profile)
            result.audit = audit_claim(entry, metrics)
            results.append(result)
    apply_floors(results)
    return results


def counts(results: list[ClaimResult]) -> dict[str, int]:
    return {s: sum(r.status == s for r in results) for s in STATUSES}


def _counts_line(c: Mapping[str, int]) -> str:
    return ", ".join(f"{c[s]} {s}" for s in STATUSES)


def to_markdown(results: list[ClaimResult], profile: str) -> str:
    """Counts per paper and status, then each paper's rows."""
    papers = sorted({r.paper for r in results})
    lines = [
        f"# Claims ledger: profile `{profile}`",
        "",
        f"{_counts_line(counts(results))}.",
        "",
        f"A sample is decided by the {LEVEL:.0%} interval of its mean (t up to 30 units, a percentile "
        f"bootstrap above; a 0/1 sample alone by the exact Clopper–Pearson interval of its proportion), "
        f"comparisons by the paired per-unit differences Δ; fewer than {MIN_UNITS} units "
        "is INCONCLUSIVE. Plain numbers are deterministic and decided `exact`.",
        "",
        "| paper | " + " | ".join(STATUSES) + " |",
        "|---|" + "---|" * len(STATUSES),
    ]
    for paper in papers:
        c = counts([r for r in results if r.paper == paper])
        lines.append(f"| {paper} | " + " | ".join(str(c[s]) for s in STATUSES) + " |")
    by_id = {r.id: r for r in results}
    for paper in papers:
        rows = [r for r in results if r.paper == paper]
        lines += ["", f"## {paper}", "", f"{_counts_line(counts(rows))}.", "",
                  "| id | claim | paper value | estimate | 90% interval | n | test | status | floors | audit | note |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            claim = r.claim.replace("|", "\\|")
            interval = "exact" if r.evidence == "exact" else (
                f"[{_fmt(r.lo)}, {_fmt(r.hi)}]" if r.lo is not None else "–")
            n = _units(r.n, r.unit) if r.n else ("–" if r.evidence != "exact" else "exact")
            floors = "(is a floor)" if r.floor else (
                ", ".join(f"{f}: {by_id[f].status if f in by_id else '?'}" for f in r.floors) or "none")
            audit = "; ".join(r.audit).replace("|", "\\|") or "ok"
            lines.append(
                f"| {r.id} | {claim} | {_fmt(r.paper_value)} | {_fmt(r.reproduced)} | {interval} | {n} | "
                f"`{r.metric}` {r.test} | **{r.status}** | {floors} | {audit} | {r.note.replace('|', '/')} |"
            )
    return "\n".join(lines) + "\n"


def write_ledger(results: list[ClaimResult], out_dir: Path, profile: str, plot: bool = False) -> list[Path]:
    """Write `claims.json` and `claims.md` in `out_dir` (and the forest plot `claims.png` if asked)."""
    paths = [write_json(out_dir / "claims.json", {"profile": profile, "claims": [asdict(r) for r in results]}),
             write_text(out_dir / "claims.md", to_markdown(results, profile))]
    if plot:
        from .claims_plot import save_forest_plot

        paths.extend(save_forest_plot([asdict(r) for r in results], out_dir / "claims.png", profile))
    return paths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Evaluate the claims ledger for one profile.")
    parser.add_argument("--profile", required=True)
    parser.add_argument("--results", type=Path, required=True, help="results/<profile> folder")
    parser.add_argument("--rule", default=None)
    parser.add_argument("--plot", action="store_true", help="also write the forest plot claims.png")
    parser.add_argument("--audit", action="store_true",
                        help="only list claims that could not fail; exit 1 if any is found")
    parser.add_argument("claims", nargs="*", type=Path, help="claims.yaml files")
    args = parser.parse_args(argv)
    if args.audit:
        from .claims_audit import audit_files

        findings, unseen = audit_files(args.claims, args.results)
        for cid, problems in findings.items():
            print(f"{cid}: {'; '.join(problems)}")
        if unseen:
            print(f"not audited on data (metric missing in {args.results}): {', '.join(unseen)}")
        print(f"audit: {len(findings)} claim(s) flagged in {len(args.claims)} file(s)")
        sys.exit(1 if findings else 0)
    results = evaluate(args.claims, args.results, args.profile)
    from .provenance import write_sidecar

    for path in write_ledger(results, args.results, args.profile, plot=args.plot):
        write_sidecar(path, profile=args.profile, rule=args.rule)
    print(to_markdown(results, args.profile))


if __name__ == "__main__":
    main()
