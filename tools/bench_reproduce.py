"""Where the CPU time of a workflow run goes: per rule and per paper, the start-up share, the ten
largest jobs, and the ratio to the last record.

    python tools/bench_reproduce.py results/bench/tiny [--wall 1834] [--record benchmarks/reproduce_tiny.json] [--save]

`make bench-reproduce` runs the tiny workflow from scratch into results/bench/ and calls this. It is
a benchmark, not a test: it prints, and writes the record only with --save.

Sources, per job:
- snakemake's `benchmark:` file (`<paper>/benchmarks/<rule>[@<wildcard value>].tsv`): wall seconds,
  CPU seconds (`cpu_time`) and peak RSS of the job's process tree, for every rule;
- an experiment job's own accounting in its provenance sidecars (`process`: pid, wall since the
  process was created, CPU of it and its children, peak RSS, warm or not), taken at its last
  artifact. A warm-started job's benchmark measures only its client, so for a rule whose jobs ran
  warm the provenance numbers replace the benchmark's.
The start-up share is the CPU a cold job spends importing the stack (measured here, once, in a fresh
interpreter) times the number of cold experiment jobs, over all CPU.

Machines differ about 2x in speed, so the run also records the machine-speed probe (shared/machine_speed.py,
in a fresh interpreter under the run's instruction-set setting) and its CPU-s in probe units (CPU-s over
the probe's seconds): two runs on two machines compare in those units. The instruction-set setting the
jobs ran under (shared/cpu_isa.py) is read from their provenance and recorded beside.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from shared import cpu_isa

STACK = "import numpy, scipy.stats, pandas, yaml, torch, lightning, matplotlib.pyplot, PIL.Image, sklearn.linear_model, einops"
PAPERS = ("p2l", "everest", "mmp", "freebind", "e2gan", "kernels")


def paper_of(rule: str) -> str:
    return next((p for p in PAPERS if rule.startswith(f"{p}_")), "workflow")


def benchmark_jobs(results: Path) -> list[dict]:
    """One row per benchmark file: rule, job (its file name), wall, CPU, peak RSS (MiB)."""
    jobs = []
    for path in sorted(results.rglob("benchmarks/*.tsv")):
        lines = path.read_text().splitlines()
        if len(lines) < 2:
            continue
        cols = dict(zip(lines[0].split("\t"), lines[-1].split("\t")))
        rule = path.stem.split("@")[0]
        jobs.append({"rule": rule, "job": path.stem, "wall_s": float(cols["s"]),
                     "cpu_s": float(cols.get("cpu_time", "nan")), "max_rss_mib": float(cols.get("max_rss", "nan")),
                     "warm": False, "source": "benchmark"})
    return jobs


def job_provenance(results: Path) -> list[dict]:
    """Every provenance sidecar of the run written by an experiment process (with its `process` record)."""
    recs = (json.loads(path.read_text()) for path in results.rglob("*.provenance.json"))
    return [rec for rec in recs if rec.get("process") and rec.get("rule")]


def process_jobs(records: list[dict]) -> list[dict]:
    """One row per experiment process (rule, pid) from the provenance sidecars' `process` records."""
    by_job: dict[tuple, dict] = {}
    for rec in records:
        proc, rule = rec["process"], rec["rule"]
        key = (rule, proc["pid"])
        job = by_job.setdefault(key, {"rule": rule, "job": f"{rule}[pid {proc['pid']}]", "wall_s": 0.0,
                                      "cpu_s": 0.0, "max_rss_mib": 0.0, "warm": bool(proc.get("warm")),
                                      "source": "provenance"})
        job["wall_s"] = max(job["wall_s"], proc.get("wall_s") or 0.0)
        job["cpu_s"] = max(job["cpu_s"], proc.get("cpu_s") or 0.0)
        job["max_rss_mib"] = max(job["max_rss_mib"], proc.get("max_rss_mib") or 0.0)
    return list(by_job.values())


def jobs_of_run(results: Path, own: list[dict]) -> list[dict]:
    """Every job once: a rule whose jobs ran warm is counted from their provenance (`own`, the process
    rows), every other from its benchmark files."""
    warm_rules = {j["rule"] for j in own if j["warm"]}
    return ([j for j in benchmark_jobs(results) if j["rule"] not in warm_rules]
            + [j for j in own if j["rule"] in warm_rules])


def import_cpu_s() -> float:
    """CPU seconds a fresh interpreter spends importing the stack an experiment job imports."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", STACK], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def machine_probe_s(setting: dict) -> float:
    """The machine-speed probe's CPU-s in a fresh one-thread interpreter, under the run's instruction-set
    `setting` (a switch the run left free is left unset)."""
    env = {k: v for k, v in os.environ.items() if k not in cpu_isa.PINNED}
    env.update({k: v for k, v in setting.items() if v != "free"}, OMP_NUM_THREADS="1")
    code = "import torch; torch.set_num_threads(1); from shared.machine_speed import probe_cpu_s; print(probe_cpu_s())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    return float(out.stdout.split()[-1])


def run_cpu_isa(records: list[dict]) -> dict:
    """The instruction-set setting the run's experiment jobs recorded (shared/cpu_isa.py); {} if none did."""
    seen = {json.dumps(rec["device"]["cpu_isa"], sort_keys=True) for rec in records
            if "cpu_isa" in rec.get("device", {})}
    if len(seen) > 1:
        raise SystemExit(f"the run's jobs ran under {len(seen)} instruction-set settings: {sorted(seen)}")
    return json.loads(seen.pop()) if seen else {}


def profile(results: Path, wall_s: float | None = None, startup_s: float | None = None) -> dict:
    records = job_provenance(results)
    own = process_jobs(records)
    jobs = jobs_of_run(results, own)
    per_rule: dict[str, dict] = defaultdict(lambda: {"jobs": 0, "cpu_s": 0.0, "wall_s": 0.0, "max_rss_mib": 0.0})
    for j in jobs:
        r = per_rule[j["rule"]]
        r["jobs"] += 1
        r["cpu_s"] += j["cpu_s"]
        r["wall_s"] += j["wall_s"]
        r["max_rss_mib"] = max(r["max_rss_mib"], j["max_rss_mib"])
    per_paper: dict[str, dict] = defaultdict(lambda: {"jobs": 0, "cpu_s": 0.0, "wall_s": 0.0})
    for rule, r in per_rule.items():
        p = per_paper[paper_of(rule)]
        for k in ("jobs", "cpu_s", "wall_s"):
            p[k] += r[k]
    experiment_rules = {j["rule"] for j in own}
    cold_experiment_jobs = sum(1 for j in jobs if j["rule"] in experiment_rules and not j["warm"])
    warm_jobs = sum(1 for j in jobs if j["warm"])
    total_cpu = sum(j["cpu_s"] for j in jobs)
    out = {"wall_s": wall_s, "cpu_s": round(total_cpu, 1), "jobs": len(jobs), "warm_jobs": warm_jobs,
           "cold_experiment_jobs": cold_experiment_jobs,
           "per_paper": {k: {kk: round(vv, 1) for kk, vv in v.items()} for k, v in sorted(per_paper.items())},
           "per_rule": {k: {kk: round(vv, 1) for kk, vv in v.items()} for k, v in sorted(per_rule.items())},
           "top_jobs": [{k: (round(v, 1) if isinstance(v, float) else v) for k, v in j.items()}
                        for j in sorted(jobs, key=lambda j: -j["cpu_s"])[:10]]}
    out["cpu_isa"] = run_cpu_isa(records)
    if startup_s is not None:
        out["import_cpu_s"] = round(startup_s, 2)
        out["startup_cpu_s"] = round(startup_s * cold_experiment_jobs, 1)
        out["startup_share"] = round(startup_s * cold_experiment_jobs / total_cpu, 4) if total_cpu else None
        out["imports_avoided_cpu_s"] = round(startup_s * warm_jobs, 1)
    return out


def ratio(now: float | None, then: float | None) -> str:
    return f"{now / then:.2f}×" if now and then else "–"


def report(prof: dict, last: dict | None) -> str:
    last = last or {}
    lines = ["| paper | jobs | CPU s | job wall s | CPU vs last record |", "|---|---|---|---|---|"]
    for paper, p in prof["per_paper"].items():
        then = last.get("per_paper", {}).get(paper, {}).get("cpu_s")
        lines.append(f"| {paper} | {p['jobs']:.0f} | {p['cpu_s']:.0f} | {p['wall_s']:.0f} | {ratio(p['cpu_s'], then)} |")
    lines.append(f"| **all** | {prof['jobs']} | **{prof['cpu_s']:.0f}** | | {ratio(prof['cpu_s'], last.get('cpu_s'))} |")
    lines += ["", "| rule | jobs | CPU s | job wall s | peak RSS MiB | CPU vs last record |", "|---|---|---|---|---|---|"]
    for rule, r in sorted(prof["per_rule"].items(), key=lambda kv: -kv[1]["cpu_s"]):
        then = last.get("per_rule", {}).get(rule, {}).get("cpu_s")
        lines.append(f"| {rule} | {r['jobs']:.0f} | {r['cpu_s']:.0f} | {r['wall_s']:.0f} | {r['max_rss_mib']:.0f} | "
                     f"{ratio(r['cpu_s'], then)} |")
    lines += ["", "Ten largest jobs (CPU s): " + "; ".join(f"{j['job']} {j['cpu_s']:.0f}" for j in prof["top_jobs"])]
    if "startup_share" in prof:
        lines.append(f"Start-up: importing the stack costs {prof['import_cpu_s']:.2f} CPU-s per cold job; "
                     f"{prof['cold_experiment_jobs']} cold experiment jobs → {prof['startup_cpu_s']:.0f} CPU-s "
                     f"({100 * (prof['startup_share'] or 0):.1f} % of all CPU); {prof['warm_jobs']} warm jobs avoided "
                     f"≈ {prof['imports_avoided_cpu_s']:.0f} CPU-s.")
    if prof.get("probe_cpu_s"):
        then = last.get("cpu_s_in_probes")
        lines.append(f"Machine-speed probe: {prof['probe_cpu_s']:.2f} CPU-s; the run's CPU is {prof['cpu_s_in_probes']:.0f} "
                     f"probe units ({ratio(prof['cpu_s_in_probes'], then)} the last record's); instruction sets: "
                     f"{', '.join(f'{k}={v}' for k, v in prof.get('cpu_isa', {}).items()) or 'not recorded'}.")
    if prof.get("wall_s"):
        lines.append(f"Workflow wall: {prof['wall_s']:.0f} s ({ratio(prof['wall_s'], last.get('wall_s'))} the last record's).")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="results/<root>/<profile> of one from-scratch run")
    parser.add_argument("--wall", type=float, default=None, help="the workflow's wall seconds")
    parser.add_argument("--record", type=Path, default=None, help="the last record (JSON) to compare with")
    parser.add_argument("--save", action="store_true", help="write this run as the new record")
    parser.add_argument("--no-import-probe", action="store_true", help="skip measuring the import cost")
    parser.add_argument("--no-machine-probe", action="store_true", help="skip the machine-speed probe")
    args = parser.parse_args(argv)
    prof = profile(args.results, args.wall, None if args.no_import_probe else import_cpu_s())
    if not args.no_machine_probe:
        prof["probe_cpu_s"] = round(machine_probe_s(prof["cpu_isa"]), 3)
        prof["cpu_s_in_probes"] = round(prof["cpu_s"] / prof["probe_cpu_s"], 1)
    last = json.loads(args.record.read_text()) if args.record and args.record.is_file() else None
    print(report(prof, last))
    if args.save and args.record:
        prof["created"] = time.strftime("%Y-%m-%d %H:%M:%S")
        prof["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                        text=True).stdout.strip() or None
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(json.dumps(prof, indent=1) + "\n")
        print(f"record written: {args.record}")


if __name__ == "__main__":
    main()
