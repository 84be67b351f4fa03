"""The claims ledger: evaluate each paper's `claims.yaml` against its metrics for one profile.

A claims file is a YAML list; one entry::

    - id: mmp.compression                       # unique, prefixed with the paper
      claim: "MMP tokens are >300x smaller than the patch bag"   # the paper's words
      paper_value: 312                          # the paper's number, or null
      metric: compression.paper_dims.ratio      # dotted key path in results/<profile>/<paper>/metrics.json
      test: {op: ">=", value: 300}              # see OPS below
      profiles: [tiny, full]                    # where the claim is checked (default: tiny, full)

`test.op` is one of `>=`, `<=`, `>`, `<`, `between` (value: [lo, hi]) and `within`
(|metric - target| <= value). Instead of a constant, a test may compare against another metric
of the same file with `ref: <key path>` (optionally times `factor`), e.g.
`{op: ">=", ref: cindex.abmil.mean}`; for `within`, `ref` is the target.

Status: PASS or FAIL when the metric (and ref) exist; NOT RUN when the metrics file or a key is
missing, or when the profile is not one the claim is checked at. A missing metric is never PASS.
"""
from __future__ import annotations

import argparse
import math
import operator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from .io import read_json, write_json, write_text

OPS = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt}
ALL_OPS = (*OPS, "between", "within")
REQUIRED = ("id", "claim", "metric", "test")
PASS, FAIL, NOT_RUN = "PASS", "FAIL", "NOT RUN"


class ClaimsError(ValueError):
    """A malformed claims file."""


@dataclass
class ClaimResult:
    id: str
    paper: str
    claim: str
    paper_value: Any
    metric: str
    reproduced: float | None
    test: str
    status: str
    note: str = ""
    profiles: list[str] = field(default_factory=list)


def lookup(metrics: Mapping, key_path: str) -> Any:
    """`a.b.c` -> metrics["a"]["b"]["c"]; KeyError if any part is missing."""
    node: Any = metrics
    for part in key_path.split("."):
        if not isinstance(node, Mapping) or part not in node:
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
        test = entry["test"]
        if not isinstance(test, Mapping) or test.get("op") not in ALL_OPS:
            raise ClaimsError(f"{path}: claim {entry['id']!r} has test {test!r}; op must be one of {list(ALL_OPS)}")
        if ("value" not in test) == ("ref" not in test) and test["op"] != "within":
            raise ClaimsError(f"{path}: claim {entry['id']!r}: give exactly one of test.value or test.ref")
        if test["op"] == "within" and ("value" not in test or "ref" not in test and "target" not in test):
            raise ClaimsError(f"{path}: claim {entry['id']!r}: 'within' needs value (tolerance) and ref or target")
        if entry["id"] in seen:
            raise ClaimsError(f"{path}: duplicate claim id {entry['id']!r}")
        seen.add(entry["id"])
        entry.setdefault("paper", path.parent.name)
        entry.setdefault("profiles", ["tiny", "full"])
        entry.setdefault("paper_value", None)
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


def _number(value: Any, key: str) -> float:
    if isinstance(value, Mapping) and "mean" in value:  # {"mean": m, "std": s} summaries
        value = value["mean"]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"metric {key!r} is {value!r}, not a number")
    return float(value)


def evaluate_claim(entry: Mapping, metrics: Mapping | None, profile: str) -> ClaimResult:
    test = entry["test"]
    result = ClaimResult(
        id=entry["id"], paper=entry["paper"], claim=entry["claim"], paper_value=entry.get("paper_value"),
        metric=entry["metric"], reproduced=None, test=describe_test(test), status=NOT_RUN,
        profiles=list(entry["profiles"]),
    )
    if metrics is None:
        result.note = "no metrics file"
        return result
    try:
        value = _number(lookup(metrics, entry["metric"]), entry["metric"])
        ref = None
        if "ref" in test:
            ref = _number(lookup(metrics, test["ref"]), test["ref"]) * float(test.get("factor", 1.0))
    except KeyError as err:
        result.note = f"metric {err.args[0]!r} missing"
        return result
    result.reproduced = value
    if profile not in entry["profiles"]:
        result.note = f"not checked at profile {profile!r} (checked at {entry['profiles']})"
        return result
    if math.isnan(value) or (ref is not None and math.isnan(ref)):
        result.status, result.note = FAIL, "metric is NaN"
        return result
    op = test["op"]
    if op in OPS:
        ok = OPS[op](value, ref if ref is not None else float(test["value"]))
    elif op == "between":
        lo, hi = test["value"]
        ok = lo <= value <= hi
    else:  # within
        target = ref if ref is not None else float(test["target"])
        ok = abs(value - target) <= float(test["value"])
        result.note = f"|diff| = {abs(value - target):.4g}"
    if ref is not None and op != "within":
        result.note = f"ref = {ref:.4g}"
    result.status = PASS if ok else FAIL
    return result


def evaluate(claim_files: list[Path], results_dir: Path, profile: str) -> list[ClaimResult]:
    """Evaluate every claim of every file against `results_dir/<paper>/metrics.json`."""
    results = []
    for path in sorted(claim_files):
        entries = load_claims(path)
        for entry in entries:
            metrics_path = results_dir / entry["paper"] / "metrics.json"
            metrics = read_json(metrics_path) if metrics_path.is_file() else None
            results.append(evaluate_claim(entry, metrics, profile))
    return results


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def to_markdown(results: list[ClaimResult], profile: str) -> str:
    counts = {s: sum(r.status == s for r in results) for s in (PASS, FAIL, NOT_RUN)}
    lines = [
        f"# Claims ledger: profile `{profile}`",
        "",
        f"{counts[PASS]} PASS, {counts[FAIL]} FAIL, {counts[NOT_RUN]} NOT RUN.",
        "",
        "| id | paper | claim | paper value | reproduced | test | status | note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        claim = r.claim.replace("|", "\\|")
        lines.append(
            f"| {r.id} | {r.paper} | {claim} | {_fmt(r.paper_value)} | {_fmt(r.reproduced)} | "
            f"`{r.metric}` {r.test} | **{r.status}** | {r.note} |"
        )
    return "\n".join(lines) + "\n"


def write_ledger(results: list[ClaimResult], out_dir: Path, profile: str) -> tuple[Path, Path]:
    """Write `claims.json` and `claims.md` in `out_dir`."""
    json_path = write_json(out_dir / "claims.json", {"profile": profile, "claims": [asdict(r) for r in results]})
    md_path = write_text(out_dir / "claims.md", to_markdown(results, profile))
    return json_path, md_path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Evaluate the claims ledger for one profile.")
    parser.add_argument("--profile", required=True)
    parser.add_argument("--results", type=Path, required=True, help="results/<profile> folder")
    parser.add_argument("--rule", default=None)
    parser.add_argument("claims", nargs="*", type=Path, help="claims.yaml files")
    args = parser.parse_args(argv)
    results = evaluate(args.claims, args.results, args.profile)
    from .provenance import write_sidecar

    for path in write_ledger(results, args.results, args.profile):
        write_sidecar(path, profile=args.profile, rule=args.rule)
    print(to_markdown(results, args.profile))


if __name__ == "__main__":
    main()
