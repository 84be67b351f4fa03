"""Fused GMM E-step + sufficient statistics in Triton (brief mmp §4a), deterministic.

  log p_nc = const_c − ½ [x_n²·(1/Σ_c) − 2 x_n·(μ_c/Σ_c)],  q_nc = softmax_c(log p_nc), q = 0 on padded rows
  P0[b,s,c] = Σ_{n∈s} q_nc,   P1[b,s,c,:] = Σ_{n∈s} q_nc x_n,   P2[b,s,c,:] = Σ_{n∈s} q_nc x_n²

Stage 1, grid (B, S): program (b, s) takes split s (BLOCK_N rows) of bag b and stores its partial sums
with plain stores into [B, S, C(, D)] buffers: no atomics, so the result is bitwise reproducible (for one
config; the autotuner's pick is cached on disk). Stage 2 sums over s in torch (a fixed order) and a small
kernel applies the τ-MAP M-step. Offsets are int64 (bags past 2³¹ elements).

precision (the dots' input precision):
  "ieee"   (default) exact fp32 on CUDA cores: accurate.
  "tf32x3" three TF32 tensor-core products per dot: about fp32 accuracy, so the expanded form above keeps
           its tolerance (plain TF32 would not: x²/Σ and 2xμ/Σ cancel when x ≈ μ).
"""
from __future__ import annotations

import math
import os

import torch
import triton
import triton.language as tl

from ..dispatch import next_pow2

PRECISIONS = ("ieee", "tf32x3")

# The interpreter times nothing worth tuning on: one config there.
_CONFIGS = ([triton.Config({"BLOCK_D": 64})] if os.environ.get("TRITON_INTERPRET") == "1" else
            [triton.Config({"BLOCK_D": bd}, num_warps=w) for bd in (32, 64, 128) for w in (4, 8)])


@triton.jit
def _tile(x_ptr, b, rows, row_ok, comps, comp_ok, d0, D, stride_xb, stride_xn, stride_xd, BLOCK_D: tl.constexpr):
    """One d-tile: the fp32 X block of these rows, and the offsets/mask of the matching [C, d] block."""
    cols = (d0 + tl.arange(0, BLOCK_D)).to(tl.int64)
    col_ok = cols < D
    x = tl.load(x_ptr + b * stride_xb + rows[:, None] * stride_xn + cols[None, :] * stride_xd,
                mask=row_ok[:, None] & col_ok[None, :], other=0.0).to(tl.float32)
    return x, comps[:, None] * D + cols[None, :], comp_ok[:, None] & col_ok[None, :]


@triton.autotune(configs=_CONFIGS, key=["C", "D", "BLOCK_N", "PRECISION"], cache_results=True)
@triton.jit
def _estep_partial_kernel(
    x_ptr, mask_ptr, inv_ptr, muinv_ptr, const_ptr, p0_ptr, p1_ptr, p2_ptr,
    N, C, D, S,
    stride_xb, stride_xn, stride_xd, stride_mb, stride_mn,
    HAS_MASK: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_D: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    s = tl.program_id(1).to(tl.int64)
    rows = s * BLOCK_N + tl.arange(0, BLOCK_N)
    comps = tl.arange(0, BLOCK_C).to(tl.int64)
    row_ok = rows < N
    comp_ok = comps < C
    valid = row_ok
    if HAS_MASK:
        valid = tl.load(mask_ptr + b * stride_mb + rows * stride_mn, mask=row_ok, other=0) != 0
    params = b * C * D                                                        # inv, μ/Σ: [B, C, D]
    quad = tl.zeros((BLOCK_N, BLOCK_C), dtype=tl.float32)
    for d0 in range(0, D, BLOCK_D):
        x, pidx, pmask = _tile(x_ptr, b, rows, row_ok, comps, comp_ok, d0, D, stride_xb, stride_xn, stride_xd,
                               BLOCK_D)
        inv = tl.load(inv_ptr + params + pidx, mask=pmask, other=0.0)
        muinv = tl.load(muinv_ptr + params + pidx, mask=pmask, other=0.0)
        quad += tl.dot(x * x, tl.trans(inv), input_precision=PRECISION)
        quad -= 2.0 * tl.dot(x, tl.trans(muinv), input_precision=PRECISION)
    const = tl.load(const_ptr + b * C + comps, mask=comp_ok, other=0.0)  # -½(d log2π + Σlog Σ + Σμ²/Σ) + log π
    logp = const[None, :] - 0.5 * quad
    logp = tl.where(comp_ok[None, :], logp, float("-inf"))
    logp = logp - tl.max(logp, axis=1)[:, None]
    p = tl.exp(logp)
    q = p / tl.sum(p, axis=1)[:, None]
    q = tl.where(valid[:, None] & comp_ok[None, :], q, 0.0)
    split = (b * S + s) * C                                                  # P0: [B, S, C]; P1, P2: [B, S, C, D]
    tl.store(p0_ptr + split + comps, tl.sum(q, axis=0), mask=comp_ok)
    qt = tl.trans(q)
    for d0 in range(0, D, BLOCK_D):
        x, pidx, pmask = _tile(x_ptr, b, rows, row_ok, comps, comp_ok, d0, D, stride_xb, stride_xn, stride_xd,
                               BLOCK_D)
        tl.store(p1_ptr + split * D + pidx, tl.dot(qt, x, input_precision=PRECISION), mask=pmask)
        tl.store(p2_ptr + split * D + pidx, tl.dot(qt, x * x, input_precision=PRECISION), mask=pmask)


@triton.jit
def _mstep_kernel(s0_ptr, s1_ptr, s2_ptr, m_ptr, pi_ptr, mu_ptr, var_ptr, C, D, tau, eps,
                  BLOCK_C: tl.constexpr, BLOCK_D: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    comps = tl.arange(0, BLOCK_C).to(tl.int64)
    comp_ok = comps < C
    w = tl.load(s0_ptr + b * C + comps, mask=comp_ok, other=0.0) + tau
    w = tl.where(comp_ok, w, 0.0)
    tl.store(pi_ptr + b * C + comps, w / tl.sum(w, axis=0), mask=comp_ok)
    for d0 in range(0, D, BLOCK_D):
        cols = (d0 + tl.arange(0, BLOCK_D)).to(tl.int64)
        ok = comp_ok[:, None] & (cols < D)[None, :]
        idx = b * C * D + comps[:, None] * D + cols[None, :]
        m = tl.load(m_ptr + comps[:, None] * D + cols[None, :], mask=ok, other=0.0)
        wsafe = tl.where(comp_ok, w, 1.0)[:, None]
        mu = (tl.load(s1_ptr + idx, mask=ok, other=0.0) + tau * m) / wsafe
        var = (tl.load(s2_ptr + idx, mask=ok, other=0.0) + tau * (eps + m * m)) / wsafe - mu * mu
        tl.store(mu_ptr + idx, mu, mask=ok)
        tl.store(var_ptr + idx, var, mask=ok)


def gmm_estep(x, mask, pi, mu, var, prototypes, tau, eps, block_n: int = 128, precision: str = "ieee"):
    """Same signature and semantics as `reference.gmm_estep` (fp32 inside; output in x's dtype).

    x and mask may be strided views (no copy). block_n rows make one split; precision: see the module.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision={precision!r}: use one of {PRECISIONS}")
    B, N, D = x.shape
    C = pi.shape[-1]
    f32 = torch.float32
    var32, mu32 = var.to(f32), mu.to(f32)
    inv = (1.0 / var32).contiguous()
    muinv = (mu32 * inv).contiguous()
    const = (-0.5 * (D * math.log(2 * math.pi) + torch.log(var32).sum(-1) + (mu32 * muinv).sum(-1))
             + torch.log(pi.to(f32))).contiguous()
    BLOCK_C = next_pow2(C)
    BLOCK_N = min(next_pow2(N), next_pow2(block_n))
    S = triton.cdiv(N, BLOCK_N)
    p0 = torch.empty(B, S, C, dtype=f32, device=x.device)
    p1 = torch.empty(B, S, C, D, dtype=f32, device=x.device)
    p2 = torch.empty_like(p1)
    _estep_partial_kernel[(B, S)](
        x, x if mask is None else mask, inv, muinv, const, p0, p1, p2, N, C, D, S,
        *x.stride(), *((0, 0) if mask is None else mask.stride()),
        HAS_MASK=mask is not None, PRECISION=precision, BLOCK_N=BLOCK_N, BLOCK_C=BLOCK_C,
    )
    s0, s1, s2 = p0.sum(1), p1.sum(1), p2.sum(1)            # fixed-order reduction over the splits
    new_pi = torch.empty(B, C, dtype=f32, device=x.device)
    new_mu, new_var = torch.empty_like(s1), torch.empty_like(s1)
    _mstep_kernel[(B,)](s0, s1, s2, prototypes.to(f32).contiguous(), new_pi, new_mu, new_var, C, D,
                        float(tau), float(eps), BLOCK_C=BLOCK_C, BLOCK_D=min(next_pow2(D), 64))
    return new_pi.to(x.dtype), new_mu.to(x.dtype), new_var.to(x.dtype)
