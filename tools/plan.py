"""The cost plan of the full profile: every job a dry run of `snakemake --profile profiles/slurm
--config profile=full` lists, its estimated FLOPs, GPU memory, data read and wall time on a named GPU
(shared.cost_plan; each paper's papers/<p>/full_cost.py), set against the runtime and memory its rule
asks for. Offline, no GPU, no weights (models are built on the meta device).

    python tools/plan.py [--out benchmarks/plan_full] [--dry-run-log FILE]

Writes <out>.csv and <out>.md, prints GPU-hours per paper, and exits 1 when a job does not fit its
limits or has no estimate (the table is still written).
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from shared.config import load_config  # noqa: E402
from shared.cost_plan import (Cost, DEFAULT_GPU, GPUS, gpu_hours, gpu_key, make_row, markdown,  # noqa: E402
                               wall_seconds, write_csv)

PAPERS = ("p2l", "everest", "e2gan", "freebind", "mmp")
JOB = re.compile(r"^(?:local)?rule (\w+):$(.*?)^ +resources: (.*?)$.*?^Shell command: (.*?)$", re.S | re.M)
# Bookkeeping rules (no paper shape behind them): single-thread CPU seconds, stated from the tiny
# and rehearsal benchmarks' order of magnitude (a ledger or a notebook over a finished run's files).
STATED_CPU_S = {"paper_metrics": 10, "claims_ledger": 60, "record": 10, "paper_notebook": 300, "overview_notebook": 120,
                "kernels_notebook": 300, "kernels_interpreter_bench": 300}


def dry_run(results: str) -> str:
    """The text of `snakemake -n` for the full profile under profiles/slurm (jobs with resources)."""
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", WANDB_MODE="offline")
    cmd = [sys.executable, "-m", "snakemake", "-n", "--nolock", "--profile", "profiles/slurm",
           "--config", "profile=full", f"results={results}"]
    run = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    if run.returncode != 0:
        raise SystemExit(f"plan: the dry run failed (rc={run.returncode}):\n{(run.stdout + run.stderr)[-3000:]}")
    return run.stdout + run.stderr


def parse_jobs(text: str) -> list[dict]:
    """[{rule, wildcards, resources, shell}] of every job in a dry run's text (the target `all` dropped)."""
    jobs = []
    for m in JOB.finditer(text):
        rule, middle, resources, shell = m.groups()
        if rule == "all":
            continue
        wc = re.search(r"^ +wildcards: (.*)$", middle, re.M)
        res = dict(kv.split("=", 1) for kv in resources.split(", ") if "=" in kv)
        jobs.append({"rule": rule, "wildcards": wc.group(1) if wc else "", "resources": res, "shell": shell})
    return jobs


def experiment_of(job: dict) -> tuple[str | None, str | None]:
    """(paper, experiment) the job's command runs (`python -m papers.<p> <experiment> ...`)."""
    m = re.search(r"-m papers\.(\w+) (\w+)", job["shell"])
    return (m.group(1), m.group(2)) if m else (None, None)


def paper_costs(paper: str) -> dict[str, Cost]:
    cfg = load_config(REPO / "papers" / paper / "config.yaml", "full")
    module = importlib.import_module(f"papers.{paper}.full_cost")
    return {c.experiment: c for c in module.job_costs(cfg)}


def plan(jobs: list[dict], costs: dict[str, dict[str, Cost]] | None = None,
         gpu: str = DEFAULT_GPU) -> tuple[list, list[str]]:
    """(rows, errors): one row per job; an error for each job without an estimate."""
    costs = {} if costs is None else costs
    rows, errors = [], []
    for job in jobs:
        paper, exp = experiment_of(job)
        if paper is None:   # bookkeeping rule
            paper = job["rule"].split("_")[0] if job["rule"].startswith("kernels") else (
                job["wildcards"].split("=")[-1] if job["wildcards"] else "workflow")
            if job["rule"] not in STATED_CPU_S:
                errors.append(f"{job['rule']} {job['wildcards']}: no estimate for this rule")
                continue
            cost = Cost(job["rule"], "cpu", cpu_s=STATED_CPU_S[job["rule"]], cpu_how="stated",
                        note="bookkeeping over finished outputs")
        else:
            if paper not in costs:
                costs[paper] = paper_costs(paper)
            if exp not in costs[paper]:
                errors.append(f"{job['rule']} {job['wildcards']}: papers/{paper}/full_cost.py has no "
                              f"estimate for experiment {exp!r}")
                continue
            cost = costs[paper][exp]
        threads = re.search(r"\bOMP_NUM_THREADS=(\d+)", job["shell"])
        cost = dataclasses.replace(cost, threads=int(threads.group(1)) if threads else 1)
        rows.append(make_row(paper, job["rule"], job["wildcards"] or exp or job["rule"], cost, job["resources"], gpu))
    rows.sort(key=lambda r: (r.paper, r.rule, r.job))
    return rows, errors


def measured_against_estimated(csv_path: Path) -> tuple[str, dict[str, float]]:
    """A Markdown section setting each probe step the GPU smoke timed (tools/gpu_smoke.py's CSV) against
    the plan's estimate of the same step on that GPU, and {paper: measured / estimated} (the mean over
    a paper's phases): the factor by which the plan's GPU times are off for that paper."""
    import csv

    lines = ["Measured against estimated (probe steps of `make gpu-smoke`, " + str(csv_path) + "):", "",
             "| probe | GPU | precision | measured s/step | estimated s/step | measured / estimated | peak GiB |",
             "|---|---|---|---|---|---|---|"]
    ratios: dict[str, list[float]] = {}
    with csv_path.open() as f:
        for row in csv.DictReader(f):
            paper, _, phase = row["paper"].partition(":")
            gpu = gpu_key(row.get("gpu", ""))
            if row.get("status") != "ok" or gpu is None:
                lines.append(f"| {row['paper']} | {row.get('gpu')} | {row.get('precision')} | - | - | - | "
                             f"{row.get('status')} |")
                continue
            cfg = load_config(REPO / "papers" / paper / "config.yaml", "full")
            module = importlib.import_module(f"papers.{paper}.full_cost")
            flops = module.probe_flops(cfg, phase) if phase else module.probe_flops(cfg)
            est = wall_seconds(Cost("probe", "gpu", flops=flops, precision=row["precision"], steps=1), gpu)
            ratio = float(row["s_per_step"]) / est
            ratios.setdefault(paper, []).append(ratio)
            lines.append(f"| {row['paper']} | {row['gpu']} | {row['precision']} | {float(row['s_per_step']):.4g} | "
                         f"{est:.4g} | {ratio:.2f} | {float(row['peak_gib']):.3g} |")
    return "\n".join(lines) + "\n", {p: sum(r) / len(r) for p, r in ratios.items()}


BEGIN, END = "<!-- plan:begin (tools/plan.py writes this block) -->", "<!-- plan:end -->"


def update_readme(readme: Path, md: str, table: Path) -> None:
    """Replace the block between the README's plan markers with the table file's summary (everything
    before the per-job table) and a pointer to the table."""
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"plan: {readme} has no plan markers ({BEGIN} ... {END})")
    summary = md.split("\n| paper | rule |")[0].rstrip()
    rel = table.resolve().relative_to(REPO) if table.resolve().is_relative_to(REPO) else table
    block = f"{BEGIN}\n{summary}\n\nPer job: `{rel}` (and `.csv`).\n{END}"
    head, rest = text.split(BEGIN, 1)
    readme.write_text(head + block + rest.split(END, 1)[1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "plan_full"), help="writes OUT.csv and OUT.md")
    ap.add_argument("--dry-run-log", help="parse this saved `snakemake -n` output instead of running one")
    ap.add_argument("--gpu", default=DEFAULT_GPU, choices=sorted(GPUS), help="the GPU the fit is judged on")
    ap.add_argument("--measured", help="tools/gpu_smoke.py's probe_steps.csv: add a measured-against-estimated "
                                       "section (default: results/gpu_smoke/probe_steps.csv when present)")
    ap.add_argument("--readme", help="rewrite the summary between this file's plan markers from the table")
    args = ap.parse_args(argv)
    if args.dry_run_log:
        text = Path(args.dry_run_log).read_text()
    else:
        with tempfile.TemporaryDirectory() as tmp:
            text = dry_run(tmp)
    jobs = parse_jobs(text)
    rows, errors = plan(jobs, gpu=args.gpu)
    out = Path(args.out)
    write_csv(rows, out.with_suffix(".csv"))
    md = markdown(rows)
    measured = Path(args.measured) if args.measured else REPO / "results" / "gpu_smoke" / "probe_steps.csv"
    if measured.is_file():
        section, ratios = measured_against_estimated(measured)
        md = md.replace("\n| paper | rule |", "\n" + section + "\n| paper | rule |", 1)
        print("plan: measured / estimated step time per paper: " + ", ".join(f"{p} {r:.2f}" for p, r in ratios.items()))
    if errors:
        md = "Jobs without an estimate:\n\n" + "\n".join(f"- {e}" for e in errors) + "\n\n" + md
    out.with_suffix(".md").parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(md)
    if args.readme:
        update_readme(Path(args.readme), md, out.with_suffix(".md"))
    print(f"plan: {len(jobs)} jobs of the full profile -> {out}.csv, {out}.md")
    for paper, h in sorted(gpu_hours(rows, args.gpu).items()):
        others = ", ".join(f"{g} {sum(r.est_h[g] for r in rows if r.paper == paper and r.device == 'gpu'):.1f}"
                           for g in GPUS if g != args.gpu)
        print(f"  {paper:9s} {h:8.1f} GPU-h on {args.gpu} ({others})")
    bad = [r for r in rows if not r.fits]
    for r in bad:
        print(f"  DOES NOT FIT: {r.rule} {r.job}: {r.why}")
    for e in errors:
        print(f"  NO ESTIMATE: {e}")
    if bad or errors:
        print(f"plan: FAILED ({len(bad)} jobs do not fit, {len(errors)} without an estimate; table in {out}.md)")
        return 1
    print("plan: every job fits its limits")
    return 0


if __name__ == "__main__":
    sys.exit(main())
