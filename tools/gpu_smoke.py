"""One call on a GPU machine (≤ 10 min on one GPU): the compiled kernels' tests and bench
(kernels/gpu_check.sh), one real-shape training or solving step per paper (papers/<p>/full_cost.py
`probe_step`, full profile, its configured precision) timed after warm-up with torch.cuda.synchronize,
with torch.cuda.max_memory_allocated, and the full-profile rehearsal with device cuda (`make rehearse-gpu`).

    python tools/gpu_smoke.py [--out results/gpu_smoke] [--papers p2l,everest,...] [--skip-kernels] [--skip-rehearsal]

Writes <out>/probe_steps.csv (paper, s/step, peak GiB, precision, GPU name, driver, torch/CUDA/Triton
versions; `make plan` sets each against its estimate). Without CUDA it prints one line and exits 2.
"""
from __future__ import annotations

import argparse
import csv
import importlib
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
PAPERS = ("p2l", "everest", "e2gan", "freebind", "mmp")


BUDGET_S = 600          # the whole smoke, on one GPU
KERNELS_S = 240         # the kernels' tests and bench


def run_within(cmd: list[str], seconds: float, env: dict | None = None) -> int:
    """The command's exit status, 124 when it ran past `seconds` (then it is stopped)."""
    try:
        return subprocess.run(cmd, cwd=REPO, env=env, timeout=seconds).returncode
    except subprocess.TimeoutExpired:
        print(f"gpu-smoke: {' '.join(cmd)} stopped after {seconds:.0f} s", flush=True)
        return 124


def versions() -> dict:
    import torch

    try:
        import triton
        triton_v = triton.__version__
    except ImportError:
        triton_v = "none"
    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        driver = "unknown"
    return {"gpu": torch.cuda.get_device_name(0), "driver": driver, "torch": torch.__version__,
            "cuda": torch.version.cuda, "triton": triton_v}


def time_step(step, warmup: int = 2, reps: int = 3, device: str = "cuda") -> tuple[float, float]:
    """(seconds per step after warm-up, peak GiB allocated; nan off CUDA) of a step."""
    import torch

    cuda = device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    for _ in range(warmup):
        step()
    sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    t = time.perf_counter()
    for _ in range(reps):
        step()
    sync()
    return (time.perf_counter() - t) / reps, torch.cuda.max_memory_allocated() / 2 ** 30 if cuda else float("nan")


def probe_papers(papers, out: Path, info: dict, device: str = "cuda", profile: str = "full",
                 warmup: int = 2, reps: int = 3) -> list[dict]:
    """One probe step per paper (and phase) at `profile`'s shapes on `device`, into out/probe_steps.csv.
    The smoke runs the full profile on CUDA; tests run a small profile on the CPU."""
    import torch

    from shared.config import load_config

    rows = []
    for paper in papers:
        cfg = load_config(REPO / "papers" / paper / "config.yaml", profile)
        module = importlib.import_module(f"papers.{paper}.full_cost")
        for phase in getattr(module, "PROBE_PHASES", (None,)):
            name = paper if phase is None else f"{paper}:{phase}"
            precision = getattr(module, "probe_precision", lambda c: str(c.trainer.precision))(cfg)
            row, step = {"paper": name, "precision": precision, **info}, None
            try:
                step = module.probe_step(cfg, device, **({} if phase is None else {"phase": phase}))
                row["s_per_step"], row["peak_gib"] = time_step(step, warmup, reps, device)
                row["status"] = "ok"
            except Exception as exc:   # one paper's failure (an OOM included) is a row, not the end
                row["status"] = f"FAILED: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"
            step = None   # free the model before the next probe
            print(f"gpu-smoke: {name}: {row.get('s_per_step', float('nan')):.3f} s/step, "
                  f"{row.get('peak_gib', float('nan')):.1f} GiB, {row['status']}", flush=True)
            rows.append(row)
            if device == "cuda":
                torch.cuda.empty_cache()
    path = out / "probe_steps.csv"
    keys = ["paper", "precision", "s_per_step", "peak_gib", "status", "gpu", "driver", "torch", "cuda", "triton"]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, keys)
        w.writeheader()
        w.writerows(rows)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(REPO / "results" / "gpu_smoke"))
    ap.add_argument("--papers", default=",".join(PAPERS))
    ap.add_argument("--skip-kernels", action="store_true")
    ap.add_argument("--skip-rehearsal", action="store_true")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("gpu-smoke: no CUDA device (torch.cuda.is_available() is False); nothing run")
        return 2
    start = time.monotonic()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    info = versions()
    print(f"gpu-smoke: {info}", flush=True)
    status = 0
    if not args.skip_kernels:
        rc = run_within(["bash", "kernels/gpu_check.sh"], KERNELS_S, env=dict(os.environ, OUT=str(out / "kernels")))
        print(f"gpu-smoke: kernels tests + bench rc={rc}", flush=True)
        status |= rc != 0
    rows = probe_papers([p for p in args.papers.split(",") if p], out, info)
    status |= any(r["status"] != "ok" for r in rows)
    if not args.skip_rehearsal:
        left = BUDGET_S - (time.monotonic() - start)
        rc = run_within(["make", "rehearse-gpu"], max(60, left))
        print(f"gpu-smoke: full-profile rehearsal on cuda rc={rc} (log: results/rehearsal-gpu.log)", flush=True)
        status |= rc != 0
    print(f"gpu-smoke: {'ok' if not status else 'FAILED'}; {out / 'probe_steps.csv'}")
    return int(bool(status))


if __name__ == "__main__":
    sys.exit(main())
