"""The claims ledger: decide each paper's `claims.yaml` on the evidence in its metrics, for one profile.

The file format and the tests are in `shared.claims_spec`; how an interval is made for each form of
evidence (samples, grouped samples, folds, counts, knobs) in `shared.claims_evidence`; the summary
and table in `shared.claims_report`; the audit of claims that could not fail in `shared.claims_audit`.

**Four outcomes.** PASS, FAIL, INCONCLUSIVE (the interval does not decide: more units would; the
ledger says how many) and UNTESTABLE (a precondition did not PASS: this world cannot test the claim;
its own interval is shown beside, and it is not counted as tested).

**Floors.** A comparative claim about a method names the floor claims (`floors:`) that say the
method also beats a trivial or classical arm (each floor says `why:` it bears on the claims). A claim
whose floors do not all PASS is UNTESTABLE, whichever way its own interval points: a win or a loss
against a baseline that itself loses to a simple arm is evidence neither way.

**Gates as preconditions.** A gate with `guards: <unit>` (e.g. `prior`) checks each trained component
of that unit (each prior follows its captions). Every other claim of its paper whose interval is over
that unit rests on those components, so a claim whose guarding gates do not all PASS is UNTESTABLE,
naming the gates. A gate may also be named in `floors:`, like a floor.

**Families.** Paper claims are decided as families (`shared.claims_multiplicity`): a paper's primary
claims (`primary: true`) under Holm at familywise 5 %, the other paper claims of the ledger under
Benjamini–Hochberg at q = 0.10. Floors, gates, accounting and diagnostics are decided per claim.

**Power** (`shared.claims_power`): each claim with a sample shows the effect it could detect with 80 %
power, and an INCONCLUSIVE one the n its observed effect would need.

**Robustness.** A claim with `robust_over: {knob, metric[, ref]}` is also decided, with the same
point test, at every point of that world knob; the ledger reports in how many of the knob's worlds
the verdict is the same as the claim's own.

NOT RUN: the metrics file or a key is missing, or the profile is not one the claim is checked at.
`python -m shared.claims --audit` lists claims that could not fail; `--power RESULTS` sizes the
primary claims' replicates from a pilot run.
"""
from __future__ import annotations

import argparse
import math
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .claims_audit import audit_claim, audit_files, ledger_findings, structural_findings
from .claims_evidence import (FAIL, INCONCLUSIVE, MIN_UNITS, NOT_RUN, PASS, UNIT_PLURAL, UNTESTABLE, Evidence, decide,
                              degenerate, gather, fmt as _fmt, knob_evidence, lookup, p_values, plural, point_verdict)
from .claims_multiplicity import FAMILYWISE, FDR, benjamini_hochberg, holm
from .claims_power import detectable_effect, threshold, units_needed
from .claims_report import STATUSES, counts, kind_summary, to_markdown
from .claims_spec import ALL_OPS, KINDS, ClaimsError, describe_test, is_knob_test, load_claims, region
from .io import read_json, write_json, write_text
from .samples import is_knob

__all__ = ["ALL_OPS", "FAIL", "INCONCLUSIVE", "KINDS", "MIN_UNITS", "NOT_RUN", "PASS", "STATUSES", "UNIT_PLURAL",
           "UNTESTABLE", "ClaimResult", "ClaimsError", "Evidence", "apply_families", "apply_floors", "apply_gates",
           "counts", "decide", "describe_evidence",
           "describe_test", "evaluate", "evaluate_claim", "gather", "kind_summary", "load_claims", "lookup",
           "to_markdown", "write_ledger"]


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
    kind: str = "paper"
    profiles: list[str] = field(default_factory=list)
    evidence: str = ""                # exact | sample | paired | count | knob
    lo: float | None = None           # the 90% interval of `reproduced`
    hi: float | None = None
    n: int | None = None              # the effective n (groups for a grouped sample)
    unit: str | None = None
    method: str = ""                  # how the interval was made
    region: list[float] | None = None  # [lo, hi] of values that satisfy the test (for the forest plot)
    floors: list[str] = field(default_factory=list)
    gates: list[str] = field(default_factory=list)    # the gates guarding its unit (`guards:`), when it has any
    knob: dict | None = None          # a knob claim's curve: points, estimate, lo, hi (verdicts, holds_from)
    robust: str | None = None         # "k/m worlds of <knob> agree"
    audit: list[str] = field(default_factory=list)
    alone: str | None = None          # the verdict of its own interval, before preconditions and family
    primary: bool = False             # a primary paper claim (`primary: true`)
    family: str | None = None         # primary (Holm within the paper) | secondary (BH across the ledger)
    p: float | None = None            # one-sided p-value of the direction its interval decides
    p_adjusted: float | None = None   # Holm's adjusted p (primary) or the BH q-value (secondary)
    detectable: float | None = None   # the distance from the threshold detectable with 80 % power at its n
    needs: int | None = None          # INCONCLUSIVE: the n its observed effect would need for 80 % power


def describe_evidence(ev: Evidence) -> str:
    """E.g. `Δ = +0.041 [0.018, 0.063], n=5 folds (corrected resampled t ...)`, or `exact: 312.3`."""
    if ev.kind == "exact":
        return f"exact: {ev.estimate:.4g}"
    knob_name = "slope" if ev.knob and "verdicts" not in ev.knob else ("Δ" if ev.knob and ev.knob.get("paired") else "x")
    name = {"sample": "x", "count": "p", "knob": knob_name}.get(ev.kind, "Δ")
    signed = name in ("Δ", "slope")
    interval = f" [{_fmt(ev.lo)}, {_fmt(ev.hi)}]" if (ev.n or 0) > 1 else ""
    under = f" over {plural(ev.n_units, 'unit')}" if ev.n_units and ev.n_units != ev.n and ev.kind != "count" else ""
    method = f" ({ev.method})" if ev.method and ev.method not in ("t", "one unit") and ev.kind != "knob" else ""
    if ev.kind == "knob" and "verdicts" not in ev.knob:
        method = f" ({ev.method})"
    return f"{name} = {_fmt(ev.estimate, signed)}{interval}, n={plural(ev.n, ev.unit)}{under}{method}"


def _knob_note(ev: Evidence, status: str) -> str:
    curve = ev.knob
    if "verdicts" not in curve:
        return describe_evidence(ev)
    where = "nowhere" if curve["holds_from"] is None else f"{curve['name']} ≥ {curve['holds_from']:g}"
    per_point = ", ".join(f"{p:g}: {v}" for p, v in zip(curve["points"], curve["verdicts"]))
    at = f" at {curve['name']} = {curve['decisive_point']:g}" if curve.get("decisive_point") is not None else ""
    return f"holds from {where} ({per_point}); decisive point{at}: {describe_evidence(ev)}"


def _robustness(entry: Mapping, metrics: Mapping, status: str) -> str | None:
    """'k/m worlds of <knob> agree': the claim's point test at each world of its robustness knob."""
    spec = entry.get("robust_over")
    if not spec or status == NOT_RUN:
        return None
    try:
        sweep = lookup(metrics, spec["metric"])
        ref = lookup(metrics, spec["ref"]) if "ref" in spec else None
    except KeyError:
        return f"{spec['knob']}: not run"
    if not is_knob(sweep) or (ref is not None and (not is_knob(ref) or ref["points"] != sweep["points"])):
        raise ClaimsError(f"{entry['id']}: robust_over needs knob samples at {spec['metric']!r}"
                          + (f" and {spec['ref']!r} at the same points" if ref is not None else ""))
    test = entry["test"]
    agree = 0
    for j, s in enumerate(sweep["samples"]):
        ev = gather(spec["metric"], s, spec.get("ref"), None if ref is None else ref["samples"][j],
                    float(test.get("factor", 1.0)))
        agree += point_verdict(ev, test) == status
    return f"{agree}/{len(sweep['samples'])} worlds of {sweep['knob']}"


def evaluate_claim(entry: Mapping, metrics: Mapping | None, profile: str) -> ClaimResult:
    """Decide one claim on `metrics` (the paper's metrics.json) at `profile`."""
    test = entry["test"]
    rlo, rhi = region(test)[:2]
    result = ClaimResult(
        id=entry["id"], paper=entry["paper"], claim=entry["claim"], paper_value=entry.get("paper_value"),
        metric=entry["metric"], reproduced=None, test=describe_test(test), status=NOT_RUN,
        kind=entry.get("kind", "paper"), profiles=list(entry.get("profiles", ["tiny", "full"])),
        region=[rlo, rhi], floors=list(entry.get("floors", [])), primary=bool(entry.get("primary")),
    )
    if metrics is None:
        result.note = "no metrics file"
        return result
    inner = test.get("holds_from", test)
    ref_key = inner.get("ref")
    try:
        metric = lookup(metrics, entry["metric"])
        ref = lookup(metrics, ref_key) if ref_key else None
    except KeyError as err:
        result.note = f"metric {err.args[0]!r} missing"
        return result
    checked = profile in result.profiles
    if is_knob_test(test):
        ev, status = knob_evidence(entry, metrics)
        note = _knob_note(ev, status)
    else:
        ev = gather(entry["metric"], metric, ref_key, ref, float(test.get("factor", 1.0)))
        if ev is None:
            result.status = INCONCLUSIVE if checked else NOT_RUN
            result.note = "a mean without per-unit values: write it with shared.samples.sample"
            return result
        status, note = None, describe_evidence(ev)
    result.reproduced, result.evidence, result.n, result.unit = ev.estimate, ev.kind, ev.n, ev.unit
    result.method, result.knob = ev.method, ev.knob
    finite = ev.values is None or all(math.isfinite(v) for v in ev.values)
    if ev.kind != "exact" and (ev.n or 0) > 1 and finite:
        result.lo, result.hi = ev.lo, ev.hi
    result.note = note
    if not checked:
        result.note = f"not checked at profile {profile!r} (checked at {result.profiles}); {result.note}"
        return result
    if not finite:
        result.status, result.note = FAIL, f"metric is NaN or infinite; {result.note}"
        return result
    if status is None:
        if ev.kind != "exact" and ev.n < MIN_UNITS:
            result.status = result.alone = INCONCLUSIVE
            result.note = f"{plural(ev.n, ev.unit)}: needs ≥ {plural(MIN_UNITS, ev.unit)}; {result.note}"
            return result
        status = decide(ev.lo, ev.hi, test)
    if degenerate(ev) and result.kind != "accounting":
        status = INCONCLUSIVE
        result.note = (f"its {plural(ev.n, ev.unit)} do not vary (SD = 0): a point, not an interval, "
                       f"decides nothing; {result.note}")
    result.status = result.alone = status
    result.robust = _robustness(entry, metrics, status)
    _power(result, ev, test.get("holds_from", test))
    return result


def _power(result: ClaimResult, ev: Evidence, test: Mapping) -> None:
    """Its one-sided p-value in the direction its interval decides, and its power (shared.claims_power)."""
    ps = ev.p or p_values(ev, test)
    if ps is None:
        return
    p_pass, p_fail = ps
    result.p = {PASS: p_pass, FAIL: p_fail}.get(result.status, min(p_pass, p_fail))
    if ev.form is None:
        return
    result.detectable = detectable_effect(ev, test)
    if result.status == INCONCLUSIVE:
        c, _ = threshold(ev.estimate, test)
        result.needs = units_needed(ev, ev.estimate - c, test)


DECIDED = (PASS, FAIL, INCONCLUSIVE)
ALONE = {PASS: "passes", FAIL: "fails", INCONCLUSIVE: "is undecided"}


def _untestable(r: ClaimResult, why: str) -> None:
    r.note = f"{ALONE[r.status]} alone, but {why}; {r.note}"
    r.status = UNTESTABLE


def apply_floors(results: list[ClaimResult]) -> None:
    """A decided claim whose floor claims do not all PASS becomes UNTESTABLE (a PASS and a FAIL alike),
    with the reason in its note; a floor's own floors are applied first."""
    by_id = {r.id: r for r in results}
    done: set[str] = set()

    def settle(r: ClaimResult) -> None:
        if r.id in done:
            return
        done.add(r.id)
        for f in r.floors:
            if f in by_id:
                settle(by_id[f])
        weak = [f"{f} {by_id[f].status}" for f in r.floors if f in by_id and by_id[f].status != PASS]
        if r.status in DECIDED and weak:
            _untestable(r, f"its floor does not pass ({', '.join(weak)})")

    for r in results:
        settle(r)


def apply_gates(results: list[ClaimResult], guards: Mapping[str, str]) -> None:
    """A decided claim over a unit that gates guard (`guards`: gate id → unit) becomes UNTESTABLE when
    one of its paper's gates for that unit does not PASS; each such claim lists its gates."""
    by_id = {r.id: r for r in results}
    for r in results:
        if r.kind == "gate" or r.unit is None:
            continue
        r.gates = [g for g, unit in guards.items() if unit == r.unit and g in by_id and by_id[g].paper == r.paper]
        weak = [f"{g} {by_id[g].status}" for g in r.gates if by_id[g].status != PASS]
        if r.status in DECIDED and weak:
            shown = ", ".join(weak[:3]) + (f" and {len(weak) - 3} more" if len(weak) > 3 else "")
            _untestable(r, f"its {UNIT_PLURAL.get(r.unit, r.unit)}' gates do not all pass ({shown})")


def apply_families(results: list[ClaimResult]) -> None:
    """Decide the paper claims with a p-value as families: each paper's primaries under Holm (familywise
    FAMILYWISE), all secondaries of the ledger under Benjamini–Hochberg (q = FDR). A verdict whose
    adjusted p-value exceeds the level becomes INCONCLUSIVE; the correction never adds a verdict."""
    tested = [r for r in results if r.kind == "paper" and r.status in DECIDED and r.p is not None]
    families = [([r for r in tested if r.primary and r.paper == paper], "primary", holm, FAMILYWISE, "Holm")
                for paper in dict.fromkeys(r.paper for r in tested if r.primary)]
    families.append(([r for r in tested if not r.primary], "secondary", benjamini_hochberg, FDR, "BH"))
    for members, family, adjust, level, name in families:
        for r, adjusted in zip(members, adjust([r.p for r in members]) if members else []):
            r.family, r.p_adjusted = family, adjusted
            if r.status in (PASS, FAIL) and adjusted > level:
                r.note = (f"{ALONE[r.status]} alone (p = {r.p:.3g}), not after {name} among {len(members)} "
                          f"{family} claims ({'p_adj' if name == 'Holm' else 'q'} = {adjusted:.3g}); {r.note}")
                r.status = INCONCLUSIVE


def evaluate(claim_files: list[Path], results_dir: Path, profile: str) -> list[ClaimResult]:
    """Evaluate every claim of every file against `results_dir/<paper>/metrics.json`."""
    results, guards, every, by_paper = [], {}, [], {}
    for path in sorted(claim_files):
        entries = load_claims(path)
        every += entries
        guards.update({e["id"]: e["guards"] for e in entries if e.get("guards")})
        roles = structural_findings(entries)
        for entry in entries:
            if entry["paper"] not in by_paper:
                metrics_path = results_dir / entry["paper"] / "metrics.json"
                by_paper[entry["paper"]] = read_json(metrics_path) if metrics_path.is_file() else None
            metrics = by_paper[entry["paper"]]
            result = evaluate_claim(entry, metrics, profile)
            result.audit = audit_claim(entry, metrics) + roles.get(entry["id"], [])
            results.append(result)
    notes = ledger_findings(every, by_paper)
    for r in results:
        r.audit += notes.get(r.id, [])
    apply_floors(results)
    apply_gates(results, guards)
    apply_families(results)
    return results


def write_ledger(results: list[ClaimResult], out_dir: Path, profile: str, plot: bool = False) -> list[Path]:
    """Write `claims.json` and `claims.md` in `out_dir` (and the forest plot `claims.png` if asked)."""
    rows = [asdict(r) for r in results]
    summary = {paper: kind_summary([r for r in results if r.paper == paper])
               for paper in dict.fromkeys(r.paper for r in results)}
    paths = [write_json(out_dir / "claims.json", {"profile": profile, "summary": summary, "claims": rows}),
             write_text(out_dir / "claims.md", to_markdown(results, profile))]
    if plot:
        from .claims_plot import save_forest_plot

        paths.extend(save_forest_plot(rows, out_dir / "claims.png", profile))
    return paths


def _noted(claim_files: list[Path], results_dir: Path) -> dict[str, list[str]]:
    """The audit's notes across claims (shared.claims_audit.ledger_findings) on the metrics at hand."""
    entries = [e for path in sorted(claim_files) for e in load_claims(path)]
    metrics = {}
    for paper in dict.fromkeys(e["paper"] for e in entries):
        path = results_dir / paper / "metrics.json"
        metrics[paper] = read_json(path) if path.is_file() else None
    return ledger_findings(entries, metrics)


def main(argv: list[str] | None = None) -> None:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--compare"]:
        from .claims_compare import main as compare_main

        sys.exit(compare_main(argv[1:]))
    parser = argparse.ArgumentParser(description="Evaluate the claims ledger for one profile "
                                     "(`--compare A B`: the claims whose verdict differs between two records).")
    parser.add_argument("--profile")
    parser.add_argument("--results", type=Path, help="results/<profile> folder")
    parser.add_argument("--rule", default=None)
    parser.add_argument("--plot", action="store_true", help="also write the forest plot claims.png")
    parser.add_argument("--audit", action="store_true",
                        help="only list claims that could not fail; exit 1 if any is found")
    parser.add_argument("--power", type=Path, metavar="PILOT_RESULTS",
                        help="only print, per primary claim, the n for 80%% power at its paper_effect with the "
                             "SD of this pilot run's results (smoke, or an earlier profile)")
    parser.add_argument("claims", nargs="*", type=Path, help="claims.yaml files")
    args = parser.parse_args(argv)
    if args.power:
        from .claims_power import plan

        print("\n".join(plan(args.claims, args.power)))
        return
    if args.results is None or (args.profile is None and not args.audit):
        parser.error("--results (and --profile, unless --audit) are required")
    if args.audit:
        findings, unseen = audit_files(args.claims, args.results)
        for cid, problems in findings.items():
            print(f"{cid}: {'; '.join(problems)}")
        if unseen:
            print(f"not audited on data (metric missing in {args.results}): {', '.join(unseen)}")
        print(f"audit: {len(findings)} claim(s) flagged in {len(args.claims)} file(s)")
        for cid, notes in _noted(args.claims, args.results).items():
            print(f"noted (listed in claims.md, not refused) {cid}: {'; '.join(notes)}")
        sys.exit(1 if findings else 0)
    results = evaluate(args.claims, args.results, args.profile)
    from .provenance import write_sidecar

    for path in write_ledger(results, args.results, args.profile, plot=args.plot):
        write_sidecar(path, profile=args.profile, rule=args.rule)
    print(to_markdown(results, args.profile))


if __name__ == "__main__":
    main()
