"""Benchmark every kernel against its torch reference (and POT's loop for Sinkhorn) over a size sweep.

    python -m kernels.bench [--out kernels/benchmarks/<device>.csv] [--quick]

On a GPU: `triton.testing.do_bench` timings (median and the 20/80 % quantiles, ms), speed-ups of the
medians, peak memory of one call of each, and for memory-bound kernels the achieved bandwidth as a
fraction of the device's measured copy bandwidth; every row names the GPU, its driver and the CUDA,
torch and Triton versions. On CPU it still runs (reference against the Triton interpreter at small
sizes) to check correctness only: its rows say `speed_result = False`, and their timings are not
speed results. Rows are per kernel, size and phase (`forward`, or `forward+backward` where the kernel
has a backward: lora_linear, whose error then covers its grads). Writes a CSV with a provenance sidecar.
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Callable

import pandas as pd
import torch

from shared.io import write_text
from shared.provenance import write_sidecar

ON_GPU = torch.cuda.is_available()
if not ON_GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")


def timing(fn: Callable, reps: int = 5) -> tuple[float, float, float]:
    """(median, 20 %, 80 % quantile) milliseconds per call: do_bench on GPU (warm-up, cache flushes),
    wall times of `reps` calls on CPU."""
    if ON_GPU:
        import triton.testing

        med, q20, q80 = triton.testing.do_bench(fn, warmup=25, rep=100, quantiles=[0.5, 0.2, 0.8])
        return float(med), float(q20), float(q80)
    import numpy as np

    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    med, q20, q80 = np.quantile(times, [0.5, 0.2, 0.8])
    return float(med), float(q20), float(q80)


def timeit(fn: Callable, reps: int = 5) -> float:
    """The median of `timing`."""
    return timing(fn, reps)[0]


def peak_mib(fn: Callable) -> float:
    """Peak CUDA memory allocated during one call, beyond what was allocated before it (MiB); NaN on CPU."""
    if not ON_GPU:
        return float("nan")
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20


def timed(row: dict, ref: Callable, kernel: Callable, reps: int = 5, **extra: Callable) -> dict:
    """`row` with the reference's and the kernel's timings and peak memory (and any extra arms')."""
    for name, fn in (("ref", ref), ("kernel", kernel), *extra.items()):
        row[f"ms_{name}"], row[f"ms_{name}_q20"], row[f"ms_{name}_q80"] = timing(fn, reps)
        row[f"peak_mib_{name}"] = peak_mib(fn)
    return row


def environment() -> dict:
    """What a GPU owner needs to compare: GPU, driver, CUDA, torch, Triton (and the CPU case)."""
    import platform

    env = {"torch": torch.__version__, "triton": __import__("triton").__version__, "cuda": torch.version.cuda,
           "gpu": torch.cuda.get_device_name(0) if ON_GPU else None, "driver": None,
           "cpu": platform.processor() or platform.machine()}
    if ON_GPU:
        import subprocess

        try:
            env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                           capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[0]
        except Exception:  # noqa: BLE001 - no nvidia-smi: the driver stays unknown
            env["driver"] = None
    return env


def copy_bandwidth_gbs() -> float | None:
    """Device copy bandwidth (read + write) of a 1 GiB tensor copy, in GB/s."""
    if not ON_GPU:
        return None
    x = torch.empty(2**28, dtype=torch.float32, device="cuda")
    y = torch.empty_like(x)
    ms = timeit(lambda: y.copy_(x))
    return 2 * x.numel() * 4 / (ms * 1e-3) / 1e9


def rel_err(a, b) -> float:
    a, b = (t.double() for t in (a if isinstance(a, tuple) else (a,))), (t.double() for t in (b if isinstance(b, tuple) else (b,)))
    return max(((u - v).abs().max() / v.abs().max().clamp_min(1e-12)).item() for u, v in zip(a, b))


def bench_gmm(N, D, C=16, B=4):
    from kernels.gmm_estep import gmm_estep_reference
    from kernels.gmm_estep.triton_kernel import gmm_estep

    dev = "cuda" if ON_GPU else "cpu"
    g = torch.Generator().manual_seed(0)
    x = torch.randn(B, N, D, generator=g).to(dev)
    mask = torch.ones(B, N, dtype=torch.bool, device=dev)
    m = torch.randn(C, D, generator=g).to(dev)
    pi = torch.full((B, C), 1 / C, device=dev)
    mu, var = m.expand(B, C, D).contiguous(), torch.full((B, C, D), 0.5, device=dev)
    args = (x, mask, pi, mu, var, m, 1e-3, 0.1)
    out, ref = gmm_estep(*args), gmm_estep_reference(*args)
    bytes_moved = 2 * x.numel() * 4  # X is read twice
    return timed(dict(kernel="gmm_estep", phase="forward", size=f"B={B} N={N} d={D} C={C}", n=N,
                      err=rel_err(out, ref), bytes=bytes_moved),
                 lambda: gmm_estep_reference(*args), lambda: gmm_estep(*args))


def bench_sinkhorn(B, n=16, m=50, iters=1000):
    import numpy as np
    import ot

    from kernels.sinkhorn_unbalanced import sinkhorn_unbalanced_reference
    from kernels.sinkhorn_unbalanced.triton_kernel import sinkhorn_unbalanced

    dev = "cuda" if ON_GPU else "cpu"
    g = torch.Generator().manual_seed(0)
    M = torch.rand(B, n, m, generator=g, dtype=torch.float64).to(dev)
    a = torch.full((B, n), 1 / n, dtype=torch.float64, device=dev)
    b = torch.full((B, m), 1 / m, dtype=torch.float64, device=dev)
    out = sinkhorn_unbalanced(a, b, M, num_iter_max=iters)
    ref = sinkhorn_unbalanced_reference(a, b, M, num_iter_max=iters)

    def pot_loop():
        return [ot.unbalanced.sinkhorn_knopp_unbalanced(a[i], b[i], M[i], 0.1, 0.5, reg_type="entropy",
                                                        numItermax=iters) for i in range(B)]

    import warnings

    warnings.filterwarnings("ignore", category=UserWarning)
    return timed(dict(kernel="sinkhorn_unbalanced", phase="forward", size=f"B={B} {n}x{m}", n=B,
                      err=rel_err(out, ref), bytes=M.numel() * 8 * 2),
                 lambda: sinkhorn_unbalanced_reference(a, b, M, num_iter_max=iters),
                 lambda: sinkhorn_unbalanced(a, b, M, num_iter_max=iters), reps=3, pot=pot_loop)


def bench_motion(B, T=8, L=196, D=768, P=512, C=3):
    from kernels.motion_select import reference as ref_mod
    from kernels.motion_select import token_counts
    from kernels.motion_select import triton_kernel as tri

    dev = "cuda" if ON_GPU else "cpu"
    g = torch.Generator().manual_seed(0)
    emb = torch.randn(B, T, L, D, generator=g).to(dev)
    pixels = torch.rand(B, T * L, P, C, generator=g).to(dev)
    k, _ = token_counts(T * L, 0.3, 0.9)
    noise = torch.rand(B, k, generator=g).to(dev)
    out, ref = tri.motion_select(emb, pixels, noise), ref_mod.motion_select(emb, pixels, noise)
    n_tgt = out[2].shape[1]
    bytes_moved = emb.numel() * 4 * 2 + B * n_tgt * P * C * 4 * 2
    return timed(dict(kernel="motion_select", phase="forward", size=f"B={B} N={T * L} D={D}", n=T * L,
                      err=rel_err(out[3], ref[3]), bytes=bytes_moved),
                 lambda: ref_mod.motion_select(emb, pixels, noise), lambda: tri.motion_select(emb, pixels, noise))


def bench_lora(M, K, N, r=16, backward: bool = False):
    """Correctness only (no paper calls lora_linear, so no speed claim): the forward, or forward and
    backward with the grads of x, A and B (err: the largest relative error of y and the grads)."""
    from kernels.lora_linear import lora_linear_reference
    from kernels.lora_linear.triton_kernel import LoRALinearFn

    dev = "cuda" if ON_GPU else "cpu"
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(M, K, generator=g).to(dev), torch.randn(N, K, generator=g).to(dev) / K**0.5
    a, b = torch.randn(r, K, generator=g).to(dev) / K**0.5, torch.randn(N, r, generator=g).to(dev)
    row = dict(kernel="lora_linear", phase="forward+backward" if backward else "forward",
               size=f"M={M} K={K} N={N} r={r}", n=M, bytes=(M * K + N * K + M * N) * 4)
    if not backward:
        with torch.no_grad():
            row["err"] = rel_err(LoRALinearFn.apply(x, w, None, a, b, 0.5), lora_linear_reference(x, w, None, a, b, 0.5))
        return timed(row, lambda: lora_linear_reference(x, w, None, a, b, 0.5),
                     lambda: LoRALinearFn.apply(x, w, None, a, b, 0.5))
    x, a, b = (t.requires_grad_(True) for t in (x, a, b))
    gy = torch.randn(M, N, generator=g).to(dev)

    def step(fn):
        y = fn(x, w, None, a, b, 0.5)
        return (y.detach(), *torch.autograd.grad(y, (x, a, b), gy))

    row["err"] = rel_err(step(LoRALinearFn.apply), step(lora_linear_reference))
    return timed(row, lambda: step(lora_linear_reference), lambda: step(LoRALinearFn.apply))


def sweep(quick: bool) -> list[dict]:
    """GPU: the claims' sizes. CPU/quick: small sizes the interpreter finishes in seconds."""
    if ON_GPU and not quick:
        return ([bench_gmm(n, 1024) for n in (10_000, 30_000, 100_000)] + [bench_sinkhorn(128)]
                + [bench_motion(8)] + [bench_lora(64, 64, 48, r=4, backward=bw) for bw in (False, True)])
    return [bench_gmm(200, 64, B=2), bench_gmm(333, 37, C=5, B=1), bench_sinkhorn(2, iters=100),
            bench_motion(1, T=4, L=16, D=64, P=32), bench_lora(64, 64, 48, r=4),
            bench_lora(64, 64, 48, r=4, backward=True)]


def run(out: Path | None, quick: bool = False, rule: str | None = None) -> pd.DataFrame:
    rows = sweep(quick)
    bw = copy_bandwidth_gbs()
    device = torch.cuda.get_device_name(0) if ON_GPU else "cpu (Triton interpreter)"
    env = environment()
    for row in rows:
        row["speedup"] = row["ms_ref"] / row["ms_kernel"]
        if "ms_pot" in row:
            row["speedup_vs_pot"] = row["ms_pot"] / row["ms_kernel"]
        row["achieved_gbs"] = row["bytes"] / (row["ms_kernel"] * 1e-3) / 1e9
        row["bw_fraction"] = row["achieved_gbs"] / bw if bw else float("nan")
        row["copy_gbs"] = bw
        row["device"] = device
        row["speed_result"] = ON_GPU and row["kernel"] != "lora_linear"   # lora_linear: correctness only
        row.update(env)
    df = pd.DataFrame(rows)
    if out is not None:
        write_text(out, df.to_csv(index=False))
        write_sidecar(out, profile=os.environ.get("REPRO_PROFILE"), rule=rule, extra={"device": device})
    return df


def claims_metrics(cpu: pd.DataFrame, gpu_csv: Path | None) -> dict:
    """Metrics for kernels/claims.yaml: interpreter max errors always; GPU speed-ups only from a GPU CSV."""
    metrics: dict = {"interpreter_max_rel_err": {k: float(v) for k, v in cpu.groupby("kernel")["err"].max().items()}}
    if gpu_csv is not None and gpu_csv.is_file():
        gpu = pd.read_csv(gpu_csv)
        gpu = gpu[gpu["speed_result"].astype(bool)]
        by = {k: g for k, g in gpu.groupby("kernel")}
        metrics["gpu"] = {
            "device": str(gpu["device"].iloc[0]),
            "gmm_estep_speedup": float(by["gmm_estep"]["speedup"].min()),
            "sinkhorn_speedup_vs_pot": float(by["sinkhorn_unbalanced"]["speedup_vs_pot"].min()),
            "motion_select_speedup": float(by["motion_select"]["speedup"].min()),
            "motion_select_bw_fraction": float(by["motion_select"]["bw_fraction"].min()),
            "max_rel_err": float(gpu["err"].max()),
        }
    return metrics


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Path("kernels/benchmarks") / ("gpu.csv" if ON_GPU else "cpu_interpreter.csv")
    parser.add_argument("--out", type=Path, default=default)
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--rule", default=None)
    parser.add_argument("--metrics", type=Path, default=None, help="also write claims metrics (JSON) here")
    parser.add_argument("--gpu-csv", type=Path, default=Path("kernels/benchmarks/gpu.csv"))
    parser.add_argument("--profile", default=None)
    args = parser.parse_args(argv)
    df = run(args.out, args.quick, args.rule)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(df)
    if args.metrics is not None:
        from shared.io import write_json

        write_json(args.metrics, claims_metrics(df, args.gpu_csv))
        write_sidecar(args.metrics, profile=args.profile, rule=args.rule, extra={"gpu_csv": str(args.gpu_csv)})


if __name__ == "__main__":
    main()
