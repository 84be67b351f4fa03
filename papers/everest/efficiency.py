"""Compute and memory accounting: analytic multiply-accumulates (MACs, the fvcore convention the
paper's GFLOPs use), FLOPs measured with `FlopCounterMode` (our attention is explicit matmuls, so the
counter sees it; fused SDPA on CPU would be skipped), activation bytes saved for backward (via
`saved_tensors_hooks`, parameters excluded, each storage counted once) and interleaved step times.

Per ViT block over n tokens of width d (MLP ratio 4):  12·n·d² (qkv, proj, MLP) + 2·n²·d (q kᵀ, a·v).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch
from torch.utils.flop_counter import FlopCounterMode


def block_macs(n: int, dim: int, mlp_ratio: float = 4.0) -> int:
    return int(n * (4 + 2 * mlp_ratio) * dim * dim + 2 * n * n * dim)


@dataclass
class VitDims:
    """Token-level dimensions of a VideoMAE model."""
    tokens: int          # N = T'·L
    patch_values: int    # tubelet·patch²·C
    dim: int
    depth: int
    decoder_dim: int
    decoder_depth: int
    num_classes: int = 400


def pretrain_macs(d: VitDims, visible: int, decoder_tokens: int, targets: int) -> dict[str, int]:
    parts = {
        "embed": d.tokens * d.patch_values * d.dim,
        "encoder": d.depth * block_macs(visible, d.dim),
        "to_decoder": visible * d.dim * d.decoder_dim,
        "decoder": d.decoder_depth * block_macs(decoder_tokens, d.decoder_dim),
        "head": targets * d.decoder_dim * d.patch_values,
    }
    parts["total"] = sum(parts.values())
    return parts


def finetune_macs(d: VitDims, kept: int) -> dict[str, int]:
    parts = {"embed": d.tokens * d.patch_values * d.dim, "encoder": d.depth * block_macs(kept, d.dim),
             "head": d.dim * d.num_classes}
    parts["total"] = sum(parts.values())
    return parts


def vit_b_dims() -> VitDims:
    """The paper's ViT-B at 16×224², tubelet 2, patch 16 (N = 1568), decoder 384 wide, 4 deep."""
    return VitDims(tokens=1568, patch_values=2 * 16 * 16 * 3, dim=768, depth=12, decoder_dim=384, decoder_depth=4)


def vit_b_table() -> list[dict]:
    """The paper's ViT-B at 16×224², tubelet 2, patch 16 (N = 1568): VideoMAE vs EVEREST GMACs."""
    from .selection import count

    d = vit_b_dims()
    tube_v = 8 * (196 - count(0.9, 196))
    k, v = count(0.3, 1568), count(0.1, 1568)
    rows = []
    for phase, base, ours, paper in [
        ("pre-train", pretrain_macs(d, tube_v, 1568, 1568 - tube_v)["total"], pretrain_macs(d, v, k, k - v)["total"], (35.8, 20.0)),
        ("fine-tune", finetune_macs(d, 1568)["total"], finetune_macs(d, count(0.6, 1568))["total"], (180.0, 98.0)),
    ]:
        rows.append({"phase": phase, "videomae_gmacs": base / 1e9, "everest_gmacs": ours / 1e9,
                     "ratio": ours / base, "paper_videomae": paper[0], "paper_everest": paper[1],
                     "paper_ratio": paper[1] / paper[0]})
    return rows


def counted_flops(fn) -> int:
    """FLOPs of everything `fn()` runs, by torch's FlopCounterMode (matmul/conv FLOPs = 2·MACs)."""
    with FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())


def saved_activation_bytes(fn, params) -> int:
    """Bytes of the tensors autograd saves for backward while `fn()` runs (forward only), each
    storage once, parameters (and views of them) excluded."""
    param_ptrs = {p.untyped_storage().data_ptr() for p in params}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor):
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in param_ptrs:
            seen[ptr] = max(seen.get(ptr, 0), storage.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(seen.values())


def flops_and_saved_bytes(fn, params) -> tuple[int, int]:
    """(`counted_flops`, `saved_activation_bytes`) of one call of `fn()`."""
    param_ptrs = {p.untyped_storage().data_ptr() for p in params}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor):
        storage = t.untyped_storage()
        if storage.data_ptr() not in param_ptrs:
            seen[storage.data_ptr()] = max(seen.get(storage.data_ptr(), 0), storage.nbytes())
        return t

    with FlopCounterMode(display=False) as counter, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return int(counter.get_total_flops()), sum(seen.values())


def peak_cuda_bytes(fn, device) -> int | None:
    """Peak CUDA memory allocated while `fn()` runs (forward and backward), above what was allocated
    before; None off CUDA (use `saved_activation_bytes` there)."""
    if not str(device).startswith("cuda"):
        return None
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device)
    fn()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - base


def interleaved_median_times(steps: dict[str, callable], repeats: int, warmup: int = 2) -> dict[str, float]:
    """Median wall seconds per call of each step function, calling the arms in turn (A B A B ...)."""
    for _ in range(warmup):
        for fn in steps.values():
            fn()
    times = {k: [] for k in steps}
    for _ in range(repeats):
        for k, fn in steps.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}
