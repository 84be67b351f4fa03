"""Rewrite the results block of this paper's README (between its RESULTS:BEGIN / RESULTS:END markers) from
one run's files: the mmp rows of claims.json, tables/*.md and the jobs' provenance and benchmark files.
README numbers come from the workflow's files, never typed:

    python -m papers.mmp.readme_results RESULTS_ROOT "how the run was made (one sentence)"

RESULTS_ROOT is the profile folder (e.g. results/tiny), holding claims.json and mmp/.
"""
from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parent / "README.md"
BEGIN, END = "<!-- RESULTS:BEGIN", "<!-- RESULTS:END -->"
TABLES = [   # (table, heading)
    ("replication", "Comparisons over 3 cohorts (`replication`; c-index averaged over each cohort's 5 folds; "
                    "the interval is the t-interval over the 3 cohort means)"),
    ("trans_factorial_cohorts", "The 2³ factorial of MMP-Trans on 3 cohorts (`trans_factorial_cohorts`: per-fold "
                                "effects averaged per cohort, t over the 3 cohort means; then every cell's c-index)"),
    ("pi_share_knob", "The π/μ knob (`pi_share_knob`: 3 cohorts × 3 folds per point; c-index over all folds, "
                      "gaps with the t-interval over the 3 cohort means)"),
    ("cohort_size_knob", "The cohort-size knob (`cohort_size_knob`: 3 cohorts × 3 folds per size)"),
]


def table(root: Path, name: str) -> str:
    return (root / "tables" / f"{name}.md").read_text().strip()


def num(x) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.4g}"


def ledger(profile_root: Path) -> list[str]:
    data = json.loads((profile_root / "claims.json").read_text())
    rows = [c for c in data["claims"] if c["paper"] == "mmp" and "tiny" in c["profiles"]]
    summary = data["summary"]["mmp"]
    counts = "; ".join(f"{kind} " + ", ".join(f"{v} {k}" for k, v in summary[kind].items() if v)
                       for kind in ("paper", "floor", "gate", "accounting", "diagnostic") if kind in summary)
    out = [f"Ledger at this profile: {counts}.", "",
           "| claim | kind | test | estimate [90% interval] | n | verdict |", "|---|---|---|---|---|---|"]
    for c in rows:
        interval = "" if c["lo"] is None else f" [{num(c['lo'])}, {num(c['hi'])}]"
        est = "exact" if c["evidence"] == "exact" else ""
        n = "exact" if c["evidence"] == "exact" else f"{c['n']} {c['unit'] or ''}s".strip() if c["n"] else "–"
        knob = c.get("knob") or {}
        where = ""
        if knob.get("verdicts"):
            where = "; at " + ", ".join(f"{p:g}: {v}" for p, v in zip(knob["points"], knob["verdicts"]))
        out.append(f"| `{c['id']}` | {c['kind']} | `{c['metric']}` {c['test']} | "
                   f"{num(c['reproduced'])}{interval}{(' ' + est) if est else ''}{where} | {n} | **{c['status']}** |")
    return out


def cpu_per_job(root: Path) -> list[str]:
    """CPU seconds per job: an experiment job's own process (its provenance `process`: warm-started, the
    cumulative CPU of the process at its last output), the notebook and the merge from their benchmarks."""
    jobs: dict[str, tuple[float, float]] = {}
    for p in sorted(root.rglob("*.provenance.json")):
        prov = json.loads(p.read_text())
        proc, rule = prov.get("process") or {}, prov.get("rule")
        if not rule or "cpu_s" not in proc:
            continue
        cpu, wall = jobs.get(rule, (0.0, 0.0))
        jobs[rule] = (max(cpu, proc["cpu_s"]), max(wall, proc.get("wall_s") or 0.0))
    for p in sorted((root.parent / "benchmarks").glob(f"paper_*@{root.name}.tsv")):   # the workflow's own rules
        head, row = p.read_text().splitlines()[:2]
        cols = dict(zip(head.split("\t"), row.split("\t")))
        jobs[p.stem] = (float(cols["cpu_time"]), float(cols["s"]))
    total = sum(c for c, _ in jobs.values())
    return [f"**{total:.0f} CPU s ({total / 60:.1f} CPU-min) over {len(jobs)} jobs**: "
            + "; ".join(f"`{r}` {c:.1f} ({w:.0f} s wall)" for r, (c, w) in sorted(jobs.items(), key=lambda kv: -kv[1][0]))
            + "."]


def block(profile_root: Path, how: str) -> str:
    root = profile_root / "mmp"
    out = [f"{BEGIN} (generated from the workflow's tables and ledger) -->",
           f"Written by `papers/mmp/readme_results.py` from `claims.json`, `tables/*.md` and the jobs' "
           f"provenance of one run, not typed. {how}", "", "### Ledger (`claims.json`, the mmp rows)", "",
           *ledger(profile_root)]
    for name, heading in TABLES:
        out += ["", f"### {heading}", "", table(root, name)]
    out += ["", "### CPU per job (CPU s: each experiment's own process from its provenance; the notebook and the "
                "metrics merge from snakemake's benchmark)", "", *cpu_per_job(root), END]
    return "\n".join(out)


def main(argv: list[str]) -> None:
    profile_root, how = Path(argv[1]), argv[2]
    text = README.read_text()
    if BEGIN not in text:
        sys.exit(f"no {BEGIN} ... {END} block in {README}")
    new = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda _: block(profile_root, how), text, flags=re.S)
    README.write_text(new)


if __name__ == "__main__":
    main(sys.argv)
