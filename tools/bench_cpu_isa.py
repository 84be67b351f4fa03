"""What pinning the CPU kernels to one instruction set costs (shared/cpu_isa.py): one tiny-profile job and
a 512² fp32 matmul, each in a fresh one-thread process, once free (each library picks its kernels from the
CPU) and once under each setting below, on this machine; and whether the job's metrics moved.

    python tools/bench_cpu_isa.py [--job freebind bonds_s0] [--save benchmarks/cpu_isa.json]

Settings: `free` (REPRO_CPU_ISA=free: nothing pinned); `pinned` (shared.cpu_isa.PINNED, MKL's cross-vendor branch COMPATIBLE); `pinned_mkl_avx2`
(the same with MKL's AVX2 branch, which MKL's documentation guarantees on Intel CPUs only). CPU-s are the
job process's user + system time; `metrics_equal_to_free` compares the job's metrics file leaf by leaf,
timings left out. A benchmark, not a test: one run each, and the ratios move with the processor.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from shared import cpu_isa
from shared.record import machine

REPO = Path(__file__).resolve().parents[1]
SETTINGS = {"free": {cpu_isa.OPT_OUT: "free"}, "pinned": cpu_isa.PINNED, "pinned_mkl_avx2": {**cpu_isa.PINNED, "MKL_CBWR": "AVX2"}}
MATMUL = ("import time, torch; torch.set_num_threads(1); a, b = torch.randn(512, 512), torch.randn(512, 512); a @ b; "
          "t = time.perf_counter(); [a @ b for _ in range(50)]; print(2 * 512**3 * 50 / (time.perf_counter() - t) / 1e9)")


def env_of(setting: dict) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in (*cpu_isa.PINNED, cpu_isa.OPT_OUT)}
    return {**env, **setting, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled"}


def child_cpu_s(cmd: list[str], env: dict) -> tuple[float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr[-2000:]}")
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), out.stdout


def leaves(node, prefix=""):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from leaves(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from leaves(value, f"{prefix}[{i}]")
    else:
        yield prefix, node


def comparable(path: Path) -> dict:
    """The metrics' leaves, timings left out (they move run to run)."""
    return {k: v for k, v in leaves(json.loads(path.read_text()))
            if not any(word in k for word in ("timing", "wall", "time", "seconds"))}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", nargs=2, default=["freebind", "bonds_s0"], metavar=("PAPER", "EXPERIMENT"))
    parser.add_argument("--profile", default="tiny")
    parser.add_argument("--save", type=Path, default=None)
    args = parser.parse_args(argv)
    paper, experiment = args.job
    rows, free_metrics = {}, None
    with tempfile.TemporaryDirectory() as tmp:
        for name, setting in SETTINGS.items():
            out = Path(tmp) / name
            cpu_s, _ = child_cpu_s([sys.executable, "-m", f"papers.{paper}", experiment, "--profile", args.profile,
                                    "--out", str(out)], env_of(setting))
            _, gflops = child_cpu_s([sys.executable, "-c", MATMUL], env_of(setting))
            metrics = comparable(out / "metrics" / f"{experiment}.json")
            free_metrics = free_metrics or metrics
            moved = sum(1 for k, v in metrics.items() if free_metrics.get(k) != v)
            rows[name] = {"setting": cpu_isa.in_effect(env_of(setting)), "job_cpu_s": round(cpu_s, 1),
                          "matmul_gflops": round(float(gflops.split()[-1]), 1), "metrics_leaves": len(metrics),
                          "leaves_moved_from_free": moved}
            print(f"{name:16s} job {cpu_s:7.1f} CPU-s  matmul {rows[name]['matmul_gflops']:6.1f} GFLOP/s  "
                  f"{moved} of {len(metrics)} metric leaves moved from free", flush=True)
    for row in rows.values():
        row["job_cpu_vs_free"] = round(row["job_cpu_s"] / rows["free"]["job_cpu_s"], 3)
    host = {k: v for k, v in machine().items() if k != "cpu_isa"}   # each row names its own setting
    result = {"job": f"{paper} {experiment} --profile {args.profile}", "machine": host, "settings": rows,
              "created": time.strftime("%Y-%m-%d %H:%M:%S")}
    if args.save:
        args.save.write_text(json.dumps(result, indent=1) + "\n")
        print(f"written: {args.save}")


if __name__ == "__main__":
    main()
