"""The record of one profile's run: the ledger's verdicts and claims, each paper's headline tables, the
commit and the machine, in a tracked folder (record/<profile>/record.json, and each table beside it as
<name>.md to read). The workflow's `record` rule writes it after the ledger; tools/readme_tables.py
fills every README table between `<!-- record:<profile>/<name> -->` markers from it, and
tests/test_record.py fails when a README table differs from the record.

    python -m shared.record RESULTS_PROFILE_DIR --out record/tiny [--table PAPER:NAME ...]

Tables in a record (names):
  verdicts        each paper's primary claims (verdict, estimate, interval, n, Holm p, power); then per paper
                  the secondary paper claims' counts per outcome, the checks, which hold and which not; and
                  how many false decisions the rule expects
  run             profile, commit, machine, devices the experiments ran on, when the ledger was written
  <paper>.claims  the paper's claims from the ledger: estimate, 90% interval (a knob claim: the verdict at
                  each knob point), n, metric and test, verdict
  <paper>.paper_claims  the same, the claims of kind paper only (a long ledger's README form)
  <paper>.cost    each job of the paper: its own process's CPU and wall seconds (an experiment job's from
                  its outputs' provenance `process`, forked from the warm server or not; the workflow's
                  metrics merge and notebook from snakemake's benchmark), largest first, and the total
  <paper>.<name>  a headline table the paper declares: PAPER_RECORD_TABLES[paper] = [names] in its
                  rules.smk, each <results>/<paper>/tables/<name>.md written by its rules from its metrics
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from . import cpu_isa
from .claims_report import STATUSES, primary_table, summary_line, tested_line
from .io import write_json
from .provenance import git_state

CHECKS = (("floor", "floors"), ("gate", "gates"), ("accounting", "accounting"))


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _short(claim_id: str, paper: str) -> str:
    return claim_id[len(paper) + 1:] if claim_id.startswith(f"{paper}.") else claim_id


ROW_KEYS = ("id", "paper", "kind", "status", "paper_value", "reproduced", "lo", "hi", "n", "unit", "test", "primary",
            "family", "p", "p_adjusted", "detectable", "needs", "alone")


def _row(c: dict) -> SimpleNamespace:
    return SimpleNamespace(**{**{k: c.get(k) for k in ROW_KEYS}, "kind": c.get("kind") or "paper"})


def verdicts_table(claims: list[dict]) -> str:
    """The primary claims; the secondary paper claims' counts per outcome; the expected false decisions."""
    ns = [_row(c) for c in claims]
    rows = []
    for paper in sorted({c["paper"] for c in claims}):
        mine = [c for c in claims if c["paper"] == paper]
        paper_claims = [c for c in mine if c.get("kind", "paper") == "paper" and not c.get("primary")]
        counts = Counter(c["status"] for c in paper_claims)
        checks = []
        for kind, label in CHECKS:
            of_kind = [c for c in mine if c.get("kind") == kind]
            if of_kind:
                checks.append(f"{label} {sum(c['status'] == 'PASS' for c in of_kind)}/{len(of_kind)}")
        holds = ", ".join(_short(c["id"], paper) for c in paper_claims if c["status"] == "PASS")
        fails = ", ".join(_short(c["id"], paper) for c in paper_claims if c["status"] == "FAIL")
        rows.append([paper, *(counts[s] for s in STATUSES), "; ".join(checks) or "–", holds or "–", fails or "–"])
    secondary = markdown_table(["paper", "secondary PASS", "FAIL", "INCONCLUSIVE", "UNTESTABLE", "NOT RUN",
                                "checks passed", "holds", "does not hold"], rows)
    return "\n".join(primary_table(ns)) + "\n\n" + secondary + "\n\n" + tested_line(ns) + "."


def claims_table(claims: list[dict], paper: str, kinds: tuple | None = None) -> str:
    """The paper's claims, paper claims first; `kinds`: only those kinds."""
    order = {"paper": 0, "floor": 1, "gate": 2, "accounting": 3, "diagnostic": 4}
    mine = sorted((c for c in claims if c["paper"] == paper and (kinds is None or c.get("kind", "paper") in kinds)),
                  key=lambda c: order.get(c.get("kind", "paper"), 5))
    rows = []
    for c in mine:
        interval = "exact" if c.get("lo") is None and c.get("reproduced") is not None else (
            f"[{_cell(c['lo'])}, {_cell(c['hi'])}]" if c.get("lo") is not None else "–")
        n = f"{c['n']} {c['unit']}s" if c.get("n") is not None and c.get("unit") else c.get("n")
        knob = c.get("knob") or {}
        if knob.get("verdicts"):
            interval += "; at " + ", ".join(f"{p:g}: {v}" for p, v in zip(knob["points"], knob["verdicts"]))
        test = f"`{c['metric']}` {c.get('test') or ''}".strip() if c.get("metric") else (
            f"`{c['test']}`" if c.get("test") else None)
        rows.append([_short(c["id"], paper), c.get("kind", "paper"), c.get("reproduced"), interval, n,
                     test, f"**{c['status']}**"])
    return markdown_table(["claim", "kind", "estimate", "90% interval", "n", "test", "verdict"], rows)


def _benchmark(path: Path) -> tuple[float, float]:
    """(CPU s, wall s) of one snakemake benchmark file."""
    head, row = path.read_text().splitlines()[:2]
    cols = dict(zip(head.split("\t"), row.split("\t")))
    return float(cols["cpu_time"]), float(cols["s"])


def cost_table(results: Path, paper: str) -> str | None:
    """Each job of `paper` in the run under `results`: its own process's CPU and wall seconds. An
    experiment job (one process, however many outputs) from its outputs' provenance `process`: a job
    forked from the workflow's warm server is not the process snakemake's benchmark measures. The
    workflow's metrics merge and notebook from their benchmarks (results/benchmarks/paper_*@<paper>.tsv).
    None when the run recorded no cost."""
    jobs: dict[tuple[str, Any], dict[str, Any]] = {}
    for side in sorted((results / paper).rglob("*.provenance.json")):
        prov = json.loads(side.read_text())
        proc, rule = prov.get("process") or {}, prov.get("rule")
        if not rule or "cpu_s" not in proc:
            continue
        words = (prov.get("command") or "").split()
        job = words[1] if len(words) > 1 and words[0].endswith("__main__.py") else rule
        row = jobs.setdefault((rule, proc.get("pid")), {"job": job, "rule": rule, "cpu": 0.0, "wall": 0.0,
                                                         "warm": bool(proc.get("warm"))})
        row["cpu"], row["wall"] = max(row["cpu"], proc["cpu_s"]), max(row["wall"], proc.get("wall_s") or 0.0)
    for bench in sorted((results / "benchmarks").glob(f"paper_*@{paper}.tsv")):
        cpu, wall = _benchmark(bench)
        rule = bench.stem.split("@")[0]
        jobs[(rule, None)] = {"job": rule.removeprefix("paper_"), "rule": rule, "cpu": cpu, "wall": wall, "warm": False}
    if not jobs:
        return None
    rows = sorted(jobs.values(), key=lambda r: -r["cpu"])
    total_cpu, total_wall = sum(r["cpu"] for r in rows), sum(r["wall"] for r in rows)
    return markdown_table(["job", "rule", "CPU s", "wall s", "warm start"], [
        *([r["job"], f"`{r['rule']}`", f"{r['cpu']:.1f}", f"{r['wall']:.0f}", "yes" if r["warm"] else "no"]
          for r in rows),
        [f"**all {len(rows)} job{'s' if len(rows) != 1 else ''}**", "", f"**{total_cpu:.0f}** ({total_cpu / 60:.1f} min)", f"{total_wall:.0f}", ""]])


def machine() -> dict[str, Any]:
    """The machine the record is written on (the run's own, for a local run)."""
    cpu = next((line.split(":", 1)[1].strip() for line in _read("/proc/cpuinfo").splitlines()
                if line.startswith("model name")), platform.processor() or platform.machine())
    mem = next((int(line.split()[1]) for line in _read("/proc/meminfo").splitlines()
                if line.startswith("MemTotal:")), None)
    return {"platform": platform.platform(), "python": platform.python_version(), "cpu": cpu,
            "cores": os.cpu_count(), "memory_gib": round(mem / 2**20, 1) if mem else None,
            "cpu_isa": cpu_isa.in_effect()}


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def devices(results: Path) -> list[str]:
    """The devices the experiments ran on, from their metrics' provenance sidecars."""
    found = set()
    for side in results.glob("*/metrics/*.json.provenance.json"):
        device = json.loads(side.read_text()).get("device") or {}
        if isinstance(device, dict) and device.get("device"):
            found.add(str(device["device"]))
    return sorted(found)


def result_commits(results: Path) -> list[str]:
    """The commits the experiments ran at (from their metrics' provenance), '+' marking uncommitted changes."""
    found = set()
    for side in results.glob("*/metrics/*.json.provenance.json"):
        git = json.loads(side.read_text()).get("git") or {}
        if git.get("commit"):
            found.add(git["commit"][:12] + ("+" if git.get("dirty") else ""))
    return sorted(found)


def build(results: str | Path, tables: list[tuple[str, str]] = ()) -> dict[str, Any]:
    """The record of the run under `results` (a profile's folder holding claims.json); `tables`: the
    (paper, name) headline tables, each results/<paper>/tables/<name>.md."""
    results = Path(results)
    ledger = json.loads((results / "claims.json").read_text())
    claims = ledger["claims"]
    ledger_prov = results / "claims.json.provenance.json"
    written = json.loads(ledger_prov.read_text()).get("created") if ledger_prov.is_file() else None
    git = git_state()
    papers = sorted({c["paper"] for c in claims})
    host = machine()
    commits = result_commits(results) or [(git.get("commit") or "–")[:12] + ("+" if git.get("dirty") else "")]
    run = markdown_table(["profile", "commits (+: uncommitted changes)", "machine", "devices", "ledger written"], [[
        ledger.get("profile"), ", ".join(commits),
        f"{host['cpu']}, {host['cores']} cores, {host['memory_gib']} GiB", ", ".join(devices(results)) or "–",
        written]])
    out_tables = {"verdicts": verdicts_table(claims), "run": run}
    for paper in papers:
        out_tables[f"{paper}.claims"] = claims_table(claims, paper)
        out_tables[f"{paper}.paper_claims"] = claims_table(claims, paper, kinds=("paper",))
        cost = cost_table(results, paper)
        if cost:
            out_tables[f"{paper}.cost"] = cost
    for paper, name in tables:
        out_tables[f"{paper}.{name}"] = (results / paper / "tables" / f"{name}.md").read_text().strip()
    return {
        "profile": ledger.get("profile"),
        "commit": git.get("commit"),   # the checkout the record was written from
        "dirty": git.get("dirty"),
        "result_commits": result_commits(results),
        "ledger_written": written,
        "recorded": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {**host, "devices": devices(results)},
        "papers": {p: {"summary": summary_line([_Row(c) for c in claims if c["paper"] == p]),
                       "headline_tables": [f"{p}.{n}" for q, n in tables if q == p] or [f"{p}.claims"]}
                   for p in papers},
        "claims": [{k: c.get(k) for k in ROW_KEYS} for c in claims],
        "tables": out_tables,
    }


class _Row:
    def __init__(self, c: dict):
        self.paper, self.kind, self.status = c["paper"], c.get("kind", "paper"), c["status"]


def write(record: dict, out: str | Path) -> Path:
    """record.json and one <name>.md per table under `out` (tables of an earlier record removed)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.md"):
        old.unlink()
    for name, text in record["tables"].items():
        (out / f"{name}.md").write_text(text + "\n")
    write_json(out / "record.json", record)
    return out / "record.json"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", help="a profile's results folder (holds claims.json)")
    ap.add_argument("--out", required=True, help="the record folder, e.g. record/tiny")
    ap.add_argument("--table", action="append", default=[], metavar="PAPER:NAME",
                    help="a headline table: <results>/<PAPER>/tables/<NAME>.md")
    args = ap.parse_args(argv)
    tables = [tuple(t.split(":", 1)) for t in args.table]
    print(write(build(args.results, tables), args.out))


if __name__ == "__main__":
    main()
