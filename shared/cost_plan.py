"""What a full-profile job costs: one cost record per experiment (from the paper's `full_cost.py`), a
roofline wall-time estimate on a named GPU (datasheet peaks × a stated utilisation), and the table that
sets each estimate against the runtime and memory its SLURM rule asks for.

Wall time on a GPU = max(FLOPs / (peak × U_COMPUTE), HBM bytes / (bandwidth × U_MEMORY), host floor)
+ steps × STEP_OVERHEAD_S, where the host floor is CPU work the GPU waits on (video decoding, a solver
on the CPU) and the per-step overhead stands for launches, the optimizer and Lightning's loop. A CPU
job's wall time is its single-thread seconds divided by the threads its command gets (OMP_NUM_THREADS,
from the rule's cpus_per_task at full) × THREAD_EFFICIENCY, plus its I/O (host_s). How each number was obtained is a column: `counted` (torch's FlopCounterMode on the
meta device, real shapes, no weights), `analytic` (a closed formula in the paper's full_cost.py),
`probed` (a rate timed on this CPU) or `stated` (a rate or size written down, not measured).
"""
from __future__ import annotations

import csv
import io
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

# Datasheet peaks (dense, no sparsity): NVIDIA H100 SXM5 80GB, A100 SXM4 80GB and H200 SXM 141GB.
GPUS: dict[str, dict[str, float]] = {
    "H100-SXM": {"bf16": 989e12, "fp16": 989e12, "tf32": 494.7e12, "fp32": 66.9e12, "hbm_bw": 3.35e12, "mem_gb": 80},
    "A100-80GB": {"bf16": 312e12, "fp16": 312e12, "tf32": 156e12, "fp32": 19.5e12, "hbm_bw": 2.039e12, "mem_gb": 80},
    "H200": {"bf16": 989e12, "fp16": 989e12, "tf32": 494.7e12, "fp32": 66.9e12, "hbm_bw": 4.8e12, "mem_gb": 141},
}
DEFAULT_GPU = "H100-SXM"
U_COMPUTE = 0.35      # model FLOP utilisation assumed for training/solving steps (stated, not measured)
U_MEMORY = 0.7        # fraction of HBM bandwidth reached by memory-bound kernels (stated)
STEP_OVERHEAD_S = 0.005   # per optimisation/solver step: launches, optimizer, the training loop (stated)
MEM_HEADROOM = 1.2    # counted saved tensors + weights × this must fit the card: fragmentation, backward buffers (stated)
THREAD_EFFICIENCY = 0.7   # parallel efficiency of torch's intra-op threads on a CPU job (stated)
CPU_FLOPS = 20e9      # one CPU thread's sustained fp32 FLOP/s for small-batch torch work (stated)
# Lightning precision names -> the peak that applies ("32-true": fp32 matmuls; torch leaves TF32 off
# for matmuls by default, so the fp32 peak is used, a conservative bound for convolutions).
PRECISION_PEAK = {"32-true": "fp32", "fp32": "fp32", "bf16-mixed": "bf16", "bf16-true": "bf16", "bf16": "bf16",
                  "16-mixed": "fp16", "16-true": "fp16", "fp16": "fp16", "tf32": "tf32"}


@dataclass
class Cost:
    """One experiment's cost over its whole job (all seeds, folds and steps it runs)."""
    experiment: str
    device: str                   # "gpu" | "cpu" | "auto" (a GPU when the job's rule asks one, else the CPU;
                                  # a CPU estimate then needs cpu_s as well)
    flops: float = 0.0            # total FLOPs of the job
    flops_how: str = "analytic"   # counted | analytic | probed | stated
    precision: str = "32-true"
    steps: int = 0                # optimisation or solver steps (for the per-step overhead)
    gpu_mem_gb: float = 0.0       # peak memory on one GPU
    mem_how: str = "analytic"
    hbm_bytes: float = 0.0        # bytes through HBM (roofline memory term; the papers take ≈ 3 × the
                                  # counted saved activations + weights per step, stated); 0: not estimated
    bytes_read: float = 0.0       # data read from storage over the job
    host_s: float = 0.0           # host-bound floor the GPU waits on (decoding, CPU solvers); CPU jobs: I/O
    cpu_s: float = 0.0            # CPU jobs: single-thread seconds
    cpu_how: str = ""
    threads: int = 1
    host_mem_gb: float = 0.0      # peak host memory
    note: str = ""


def count_step(fn) -> tuple[int, int]:
    """(FLOPs, bytes of tensors saved for backward) of fn(), counted by FlopCounterMode and a
    saved-tensors hook; on the meta device this needs no weights and no memory. A storage saved by
    several ops or as several views counts once (its largest view): what a backward keeps, without the
    allocator's fragmentation and the transient buffers of the backward itself."""
    per_storage: dict[int, int] = {}

    def pack(t):
        # a storage saved by two ops (softmax's output and the matmul after it, as a view) counts once
        key = t.untyped_storage()._cdata
        per_storage[key] = max(per_storage.get(key, 0), t.numel() * t.element_size())
        return t

    with FlopCounterMode(display=False) as counter, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return int(counter.get_total_flops()), sum(per_storage.values())


def param_bytes(module: torch.nn.Module, trainable_states: int = 4) -> int:
    """Bytes of a module's parameters: fp32 weights, and for trainable ones grads + two Adam moments."""
    return sum(p.numel() * 4 * (trainable_states if p.requires_grad else 1) for p in module.parameters())


_CPU_RATE: list[float] = []


def cpu_rate() -> float:
    """Single-thread fp32 FLOP/s of this CPU, probed once: the best of 3 timed 4096×1024 @ 1024×512
    matmuls under torch.set_num_threads(1) (~0.1 s). Measured on a shared, loaded machine it is a lower
    bound; CPU_FLOPS is used when REPRO_PLAN_CPU_RATE=stated."""
    import os
    import time

    if os.environ.get("REPRO_PLAN_CPU_RATE") == "stated":
        return CPU_FLOPS
    if not _CPU_RATE:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            a, b = torch.randn(4096, 1024), torch.randn(1024, 512)
            a @ b
            best = min(_timed(lambda: a @ b, time) for _ in range(3))
        finally:
            torch.set_num_threads(threads)
        _CPU_RATE.append(2 * 4096 * 1024 * 512 / best)
    return _CPU_RATE[0]


def _timed(fn, time) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def autocast(device, precision: str):
    """The autocast context a Lightning precision setting gives on this device (none for 32-true or meta)."""
    import contextlib

    dtype = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}.get(str(precision))
    kind = torch.device(device).type
    if dtype is None or kind == "meta":
        return contextlib.nullcontext()
    return torch.autocast(kind, dtype=dtype)


# Stable Diffusion 1.5's published architecture (diffusers configs), for models built without weights.
SD15_UNET = dict(in_channels=4, out_channels=4, block_out_channels=(320, 640, 1280, 1280), layers_per_block=2,
                 down_block_types=("CrossAttnDownBlock2D",) * 3 + ("DownBlock2D",),
                 up_block_types=("UpBlock2D",) + ("CrossAttnUpBlock2D",) * 3, cross_attention_dim=768,
                 attention_head_dim=8)
SD15_VAE = dict(in_channels=3, out_channels=3, block_out_channels=(128, 256, 512, 512), latent_channels=4,
                down_block_types=("DownEncoderBlock2D",) * 4, up_block_types=("UpDecoderBlock2D",) * 4,
                layers_per_block=2)


def sd15(device="meta", unet_in_channels: int = 4):
    """SD-1.5-shaped UNet and VAE with random (or, on meta, no) weights, frozen. InstructPix2Pix's
    UNet is the same with 8 input channels (the image latent concatenated)."""
    import itertools

    from diffusers import AutoencoderKL, UNet2DConditionModel

    with torch.device(device):
        unet = UNet2DConditionModel(**{**SD15_UNET, "in_channels": unet_in_channels})
        vae = AutoencoderKL(**SD15_VAE)
    for p in itertools.chain(unet.parameters(), vae.parameters()):
        p.requires_grad_(False)
    return unet, vae


def sd15_part_costs(image_size: int, unet_in_channels: int = 4) -> dict:
    """{part: (forward FLOPs, saved bytes)} of SD-1.5's UNet, decoder and encoder on one image of this
    size, counted on meta (saved bytes: what a backward to the latent keeps), and the weights' bytes."""
    unet, vae = sd15("meta", unet_in_channels)
    lat = image_size // 8
    with torch.device("meta"):
        z = torch.empty(1, 4, lat, lat, requires_grad=True)
        zu = torch.empty(1, unet_in_channels, lat, lat, requires_grad=True)
        x = torch.empty(1, 3, image_size, image_size, requires_grad=True)
        c = torch.empty(1, 77, 768)
        return {"unet": count_step(lambda: unet(zu, torch.tensor([500]), c).sample),
                "dec": count_step(lambda: vae.decode(z).sample),
                "enc": count_step(lambda: vae.encode(x).latent_dist.mean),
                "weights": (0, sum(p.numel() * 4 for m in (unet, vae) for p in m.parameters()))}


def gpu_key(name: str) -> str | None:
    """The GPUS key of a device name as torch reports it ("NVIDIA H100 80GB HBM3" -> "H100-SXM")."""
    for part, key in (("H200", "H200"), ("H100", "H100-SXM"), ("A100", "A100-80GB")):
        if part in name.upper():
            return key
    return None


def bound_of(cost: Cost, gpu: str = DEFAULT_GPU) -> str:
    """Which term of the estimate dominates: compute, memory (HBM), host (decoding, CPU work), overhead
    (per-step), or cpu for a CPU job."""
    if cost.device != "gpu":
        return "cpu"
    spec = GPUS[gpu]
    terms = {"compute": cost.flops / (spec[PRECISION_PEAK.get(cost.precision, "fp32")] * U_COMPUTE),
             "memory": cost.hbm_bytes / (spec["hbm_bw"] * U_MEMORY), "host": cost.host_s,
             "overhead": cost.steps * STEP_OVERHEAD_S}
    return max(terms, key=terms.get)


def wall_seconds(cost: Cost, gpu: str = DEFAULT_GPU) -> float:
    """Estimated wall seconds of the job (module docstring)."""
    if cost.device == "cpu":
        threads = max(1, cost.threads)
        return cost.cpu_s / (threads * (THREAD_EFFICIENCY if threads > 1 else 1.0)) + cost.host_s
    spec = GPUS[gpu]
    peak = spec[PRECISION_PEAK.get(cost.precision, "fp32")]
    roof = max(cost.flops / (peak * U_COMPUTE), cost.hbm_bytes / (spec["hbm_bw"] * U_MEMORY), cost.host_s)
    return roof + cost.steps * STEP_OVERHEAD_S


@dataclass
class Row:
    paper: str
    rule: str
    job: str              # the rule's wildcards, or the experiment
    experiment: str
    device: str
    precision: str
    tflops: float
    flops_how: str
    gpu_mem_gb: float
    mem_how: str
    data_read_gb: float
    est_h: dict = field(default_factory=dict)   # gpu name -> hours
    limit_h: float = 0.0
    mem_limit_gb: float = 0.0
    host_mem_gb: float = 0.0
    gpu_asked: int = 0
    fits: bool = True
    why: str = ""
    judged_on: str = DEFAULT_GPU
    bound: str = ""
    note: str = ""


def check(row: Row, cost: Cost, gpu: str = DEFAULT_GPU) -> Row:
    """Set row.fits / row.why: the estimate on `gpu` within the runtime limit, GPU memory within the
    card, host memory within mem_mb, and a GPU asked for where the job uses one."""
    why = []
    if row.est_h[gpu] > row.limit_h:
        why.append(f"time {row.est_h[gpu]:.1f} h > {row.limit_h:.1f} h")
    if cost.device == "gpu" and cost.gpu_mem_gb * MEM_HEADROOM > GPUS[gpu]["mem_gb"]:
        why.append(f"GPU memory {cost.gpu_mem_gb:.0f} GB × {MEM_HEADROOM} > {GPUS[gpu]['mem_gb']:.0f} GB")
    if cost.device == "gpu" and not row.gpu_asked:
        why.append("uses a GPU, rule asks none")
    if cost.host_mem_gb and cost.host_mem_gb > row.mem_limit_gb:
        why.append(f"host memory {cost.host_mem_gb:.0f} GB > {row.mem_limit_gb:.0f} GB")
    row.fits, row.why, row.judged_on = not why, "; ".join(why), gpu
    return row


def gpus_asked(resources: dict) -> int:
    """GPUs a job's resources ask for (`gpu: N`, or `gres: gpu[:model]:N`)."""
    return int(resources.get("gpu", 0) or 0) or int(str(resources.get("gres", "gpu:0")).rsplit(":", 1)[-1] or 0)


def make_row(paper: str, rule: str, job: str, cost: Cost, resources: dict, gpu: str = DEFAULT_GPU) -> Row:
    """One table row: the cost against the rule's resources (runtime minutes, mem_mb, gpu/gres)."""
    gpu_asked = gpus_asked(resources)
    if cost.device == "auto":   # CUDA when the job has a GPU, else the CPU (the experiment's device: auto)
        cost = replace(cost, device="gpu" if gpu_asked else "cpu")
    row = Row(paper=paper, rule=rule, job=job, experiment=cost.experiment, device=cost.device,
              precision=cost.precision if cost.device == "gpu" else "fp32 (CPU)", tflops=cost.flops / 1e12,
              flops_how=cost.flops_how if cost.device == "gpu" else (
                  f"{cost.flops_how if cost.flops else '-'}; time: {cost.cpu_how or 'stated'}"),
              gpu_mem_gb=cost.gpu_mem_gb if cost.device == "gpu" else 0.0, mem_how=cost.mem_how if cost.device == "gpu" else "-",
              data_read_gb=cost.bytes_read / 1e9, est_h={g: wall_seconds(cost, g) / 3600 for g in GPUS},
              limit_h=float(resources.get("runtime", 0)) / 60, mem_limit_gb=float(resources.get("mem_mb", 0)) / 1000,
              host_mem_gb=cost.host_mem_gb, gpu_asked=gpu_asked, note=cost.note, bound=bound_of(cost, gpu))
    return check(row, cost, gpu)


COLUMNS = ["paper", "rule", "job", "experiment", "device", "precision", "TFLOPs", "flops_how", "gpu_mem_GB",
           "mem_how", "data_read_GB", "bound", *[f"est_h_{g}" for g in GPUS], "limit_h", "mem_limit_GB", "gpu_asked", "fits",
           "why", "note"]


def _cells(r: Row) -> list:
    return [r.paper, r.rule, r.job, r.experiment, r.device, r.precision, f"{r.tflops:.4g}", r.flops_how,
            f"{r.gpu_mem_gb:.3g}", r.mem_how, f"{r.data_read_gb:.3g}", r.bound, *[f"{r.est_h[g]:.3g}" for g in GPUS],
            f"{r.limit_h:.3g}", f"{r.mem_limit_gb:.3g}", r.gpu_asked, "yes" if r.fits else "NO", r.why, r.note]


def gpu_hours(rows: list[Row], gpu: str = DEFAULT_GPU) -> dict[str, float]:
    """Estimated GPU-hours per paper on `gpu` (GPU jobs only, one GPU each)."""
    out: dict[str, float] = {}
    for r in rows:
        out.setdefault(r.paper, 0.0)
        if r.device == "gpu":
            out[r.paper] += r.est_h[gpu]
    return out


def cpu_hours(rows: list[Row]) -> dict[str, float]:
    out: dict[str, float] = {}
    for r in rows:
        if r.device == "cpu":
            out[r.paper] = out.get(r.paper, 0.0) + r.est_h[r.judged_on]
    return out


def write_csv(rows: list[Row], path: Path) -> None:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow(_cells(r))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(buf.getvalue())


def markdown(rows: list[Row]) -> str:
    """The summary (GPU-hours per paper, jobs that do not fit, the assumptions) and the per-job table."""
    gh, ch = gpu_hours(rows), cpu_hours(rows)
    lines = ["GPU-hours per paper (estimated hours a GPU is held, waits on the host included; one GPU per job):", "",
             "| paper | GPU jobs | " + " | ".join(f"GPU-h {g}" for g in GPUS) + " | CPU-job wall h | jobs that do not fit |",
             "|---|---|" + "---|" * len(GPUS) + "---|---|"]
    for p in sorted(gh):
        prs = [r for r in rows if r.paper == p]
        hs = " | ".join(f"{sum(r.est_h[g] for r in prs if r.device == 'gpu'):.1f}" for g in GPUS)
        lines.append(f"| {p} | {sum(r.device == 'gpu' for r in prs)} | {hs} | {ch.get(p, 0):.1f} | "
                     f"{sum(not r.fits for r in prs)} |")
    lines += ["", f"Assumptions (stated, not measured): compute utilisation {U_COMPUTE:.0%} of the datasheet peak "
              f"of the job's precision, {U_MEMORY:.0%} of HBM bandwidth, {STEP_OVERHEAD_S * 1e3:.0f} ms per step of "
              f"overhead, GPU memory × {MEM_HEADROOM} within the card, {CPU_FLOPS / 1e9:.0f} GFLOP/s per CPU thread where no probe was run, {THREAD_EFFICIENCY:.0%} "
              f"parallel efficiency above one thread (threads: the job's OMP_NUM_THREADS); fits is judged on "
              f"{rows[0].judged_on if rows else DEFAULT_GPU}" + (f"; CPU rate probed on the planning machine (shared, under load): "
                                  f"{_CPU_RATE[0] / 1e9:.1f} GFLOP/s per thread" if _CPU_RATE else "") + ". Peaks: " + "; ".join(
                  f"{g} bf16 {s['bf16'] / 1e12:.0f}, tf32 {s['tf32'] / 1e12:.0f}, fp32 {s['fp32'] / 1e12:.1f} TFLOP/s, "
                  f"HBM {s['hbm_bw'] / 1e12:.2f} TB/s" for g, s in GPUS.items()) + ".", ""]
    bad = [r for r in rows if not r.fits]
    if bad:
        lines += ["Jobs that do not fit their rule's limits:", ""]
        lines += [f"- {r.rule} {r.job}: {r.why}" for r in bad]
        lines.append("")
    lines += ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(str(c).replace("|", "/") for c in _cells(r)) + " |" for r in rows]
    return "\n".join(lines) + "\n"
