"""Triton kernels for EVEREST's memory-bound glue: the temporal-difference scores and the
normalised pixel targets gathered for the target tokens only (brief everest §4, steps 1 and 4).
Selection (a stable sort of B×N scores) stays in torch. Offsets are int64 (clips past 2³¹ elements);
inputs may be strided views."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..dispatch import next_pow2
from .reference import split_tokens


@triton.jit
def _score_kernel(e_ptr, s_ptr, T, L, D, stride_eb, stride_et, stride_el, stride_ed,
                  BLOCK_L: tl.constexpr, BLOCK_D: tl.constexpr):
    bt = tl.program_id(0).to(tl.int64)
    b = bt // T
    t = bt % T
    t_cur = tl.maximum(t, 1)                    # slice 0 copies slice 1
    pos = tl.program_id(1).to(tl.int64) * BLOCK_L + tl.arange(0, BLOCK_L)
    pos_ok = pos < L
    acc = tl.zeros((BLOCK_L,), dtype=tl.float32)
    cur_ptr = e_ptr + b * stride_eb + t_cur * stride_et + pos[:, None] * stride_el
    prev_ptr = cur_ptr - stride_et
    for d0 in range(0, D, BLOCK_D):
        cols = (d0 + tl.arange(0, BLOCK_D)).to(tl.int64)
        ok = pos_ok[:, None] & (cols < D)[None, :]
        cur = tl.load(cur_ptr + cols[None, :] * stride_ed, mask=ok, other=0.0).to(tl.float32)
        prev = tl.load(prev_ptr + cols[None, :] * stride_ed, mask=ok, other=0.0).to(tl.float32)
        diff = cur - prev
        acc += tl.sum(diff * diff, axis=1)
    tl.store(s_ptr + (b * T + t) * L + pos, tl.sqrt(acc), mask=pos_ok)


@triton.jit
def _target_kernel(px_ptr, idx_ptr, out_ptr, P, C, n_tgt, stride_pb, stride_pn, stride_pp, stride_pc,
                   BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    j = tl.program_id(1).to(tl.int64)
    tok = tl.load(idx_ptr + b * n_tgt + j).to(tl.int64)
    p = tl.arange(0, BLOCK_P).to(tl.int64)
    c = tl.arange(0, BLOCK_C).to(tl.int64)
    ok = (p < P)[:, None] & (c < C)[None, :]
    x = tl.load(px_ptr + b * stride_pb + tok * stride_pn + p[:, None] * stride_pp + c[None, :] * stride_pc, mask=ok,
                other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / P
    xc = tl.where(ok, x - mean[None, :], 0.0)
    std = tl.sqrt(tl.sum(xc * xc, axis=0) / (P - 1))
    tl.store(out_ptr + ((b * n_tgt + j) * P + p[:, None]) * C + c[None, :], xc / (std[None, :] + 1e-6), mask=ok)


def motion_scores(emb: torch.Tensor) -> torch.Tensor:
    B, T, L, D = emb.shape
    if T < 2:
        raise ValueError(f"need at least 2 temporal slices, got {T}")
    emb = emb.detach()
    out = torch.empty(B, T * L, dtype=torch.float32, device=emb.device)
    BLOCK_L = min(next_pow2(L), 64)
    _score_kernel[(B * T, triton.cdiv(L, BLOCK_L))](emb, out, T, L, D, *emb.stride(), BLOCK_L=BLOCK_L,
                                                    BLOCK_D=min(next_pow2(D), 128))
    return out


def normalized_targets(pixels: torch.Tensor, target_idx: torch.Tensor) -> torch.Tensor:
    B, N, P, C = pixels.shape
    n_tgt = target_idx.shape[1]
    idx = target_idx.contiguous()
    out = torch.empty(B, n_tgt, P, C, dtype=torch.float32, device=pixels.device)
    _target_kernel[(B, n_tgt)](pixels, idx, out, P, C, n_tgt, *pixels.stride(), BLOCK_P=next_pow2(P),
                               BLOCK_C=next_pow2(C, 4))
    return out.flatten(2)


def motion_select(emb, pixels, noise, mask_ratio=0.9):
    n = emb.shape[1] * emb.shape[2]
    scores = motion_scores(emb)
    visible, target = split_tokens(scores, noise, int((1 - mask_ratio) * n))
    return scores, visible, target, normalized_targets(pixels, target)
