"""Fused GMM E-step + sufficient statistics in Triton (brief mmp §4a).

Grid (B, ceil(N / BLOCK_N)). Each program takes BLOCK_N rows of one bag:
  pass 1 over d-tiles: quad[n, c] += (x²)·(1/Σ)ᵀ - 2 x·(μ/Σ)ᵀ   (x² only in registers)
  stable log-softmax over C in registers, q = 0 on padded rows
  pass 2 over d-tiles: qᵀX, qᵀX² and Σq, atomically added to per-bag accumulators.
A second small kernel applies the τ-MAP M-step per (bag, component). fp32 accumulation.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ..dispatch import next_pow2


@triton.jit
def _tile(x_ptr, b, rows, row_ok, comps, comp_ok, d0, D, stride_xb, stride_xn, stride_pb, stride_pc,
          BLOCK_D: tl.constexpr):
    """One d-tile: the fp32 X block of these rows, and the offsets/mask of the matching [C, d] block."""
    cols = d0 + tl.arange(0, BLOCK_D)
    col_ok = cols < D
    x = tl.load(x_ptr + b * stride_xb + rows[:, None] * stride_xn + cols[None, :],
                mask=row_ok[:, None] & col_ok[None, :], other=0.0).to(tl.float32)
    pidx = b * stride_pb + comps[:, None] * stride_pc + cols[None, :]
    return x, pidx, comp_ok[:, None] & col_ok[None, :]


@triton.jit
def _estep_stats_kernel(
    x_ptr, mask_ptr, inv_ptr, muinv_ptr, const_ptr, s0_ptr, s1_ptr, s2_ptr,
    N, C, D,
    stride_xb, stride_xn, stride_pb, stride_pc,
    BLOCK_N: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_D: tl.constexpr,
):
    b = tl.program_id(0)
    rows = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    comps = tl.arange(0, BLOCK_C)
    row_ok = rows < N
    comp_ok = comps < C
    valid = tl.load(mask_ptr + b * N + rows, mask=row_ok, other=0) != 0
    quad = tl.zeros((BLOCK_N, BLOCK_C), dtype=tl.float32)
    for d0 in range(0, D, BLOCK_D):
        x, pidx, pmask = _tile(x_ptr, b, rows, row_ok, comps, comp_ok, d0, D, stride_xb, stride_xn, stride_pb,
                               stride_pc, BLOCK_D)
        inv = tl.load(inv_ptr + pidx, mask=pmask, other=0.0)
        muinv = tl.load(muinv_ptr + pidx, mask=pmask, other=0.0)
        quad += tl.dot(x * x, tl.trans(inv), input_precision="ieee")
        quad -= 2.0 * tl.dot(x, tl.trans(muinv), input_precision="ieee")
    const = tl.load(const_ptr + b * C + comps, mask=comp_ok, other=0.0)       # -1/2(d log2π + Σlog Σ + Σμ²/Σ) + log π
    logp = const[None, :] - 0.5 * quad
    logp = tl.where(comp_ok[None, :], logp, float("-inf"))
    logp = logp - tl.max(logp, axis=1)[:, None]
    p = tl.exp(logp)
    q = p / tl.sum(p, axis=1)[:, None]
    q = tl.where(valid[:, None] & comp_ok[None, :], q, 0.0)
    tl.atomic_add(s0_ptr + b * C + comps, tl.sum(q, axis=0), mask=comp_ok)
    qt = tl.trans(q)
    for d0 in range(0, D, BLOCK_D):
        x, pidx, pmask = _tile(x_ptr, b, rows, row_ok, comps, comp_ok, d0, D, stride_xb, stride_xn, stride_pb,
                               stride_pc, BLOCK_D)
        tl.atomic_add(s1_ptr + pidx, tl.dot(qt, x, input_precision="ieee"), mask=pmask)
        tl.atomic_add(s2_ptr + pidx, tl.dot(qt, x * x, input_precision="ieee"), mask=pmask)


@triton.jit
def _mstep_kernel(s0_ptr, s1_ptr, s2_ptr, m_ptr, pi_ptr, mu_ptr, var_ptr, C, D, tau, eps,
                  BLOCK_C: tl.constexpr, BLOCK_D: tl.constexpr):
    b = tl.program_id(0)
    comps = tl.arange(0, BLOCK_C)
    comp_ok = comps < C
    w = tl.load(s0_ptr + b * C + comps, mask=comp_ok, other=0.0) + tau
    w = tl.where(comp_ok, w, 0.0)
    tl.store(pi_ptr + b * C + comps, w / tl.sum(w, axis=0), mask=comp_ok)
    for d0 in range(0, D, BLOCK_D):
        cols = d0 + tl.arange(0, BLOCK_D)
        ok = comp_ok[:, None] & (cols < D)[None, :]
        idx = b * C * D + comps[:, None] * D + cols[None, :]
        m = tl.load(m_ptr + comps[:, None] * D + cols[None, :], mask=ok, other=0.0)
        wsafe = tl.where(comp_ok, w, 1.0)[:, None]
        mu = (tl.load(s1_ptr + idx, mask=ok, other=0.0) + tau * m) / wsafe
        var = (tl.load(s2_ptr + idx, mask=ok, other=0.0) + tau * (eps + m * m)) / wsafe - mu * mu
        tl.store(mu_ptr + idx, mu, mask=ok)
        tl.store(var_ptr + idx, var, mask=ok)


def gmm_estep(x, mask, pi, mu, var, prototypes, tau, eps, block_n: int = 128, block_d: int = 64):
    """Same signature and semantics as `reference.gmm_estep` (fp32 inside; output in x's dtype)."""
    B, N, D = x.shape
    C = pi.shape[-1]
    f32 = torch.float32
    x = x.contiguous()
    mask = torch.ones(B, N, dtype=torch.int8, device=x.device) if mask is None else mask.to(torch.int8).contiguous()
    var32, mu32 = var.to(f32), mu.to(f32)
    inv = (1.0 / var32).contiguous()
    muinv = (mu32 * inv).contiguous()
    const = (-0.5 * (D * math.log(2 * math.pi) + torch.log(var32).sum(-1) + (mu32 * muinv).sum(-1))
             + torch.log(pi.to(f32))).contiguous()
    s0 = torch.zeros(B, C, dtype=f32, device=x.device)
    s1 = torch.zeros(B, C, D, dtype=f32, device=x.device)
    s2 = torch.zeros_like(s1)
    BLOCK_C = next_pow2(C)
    BLOCK_N = min(next_pow2(N), next_pow2(block_n))
    BLOCK_D = min(next_pow2(D), next_pow2(block_d))
    _estep_stats_kernel[(B, triton.cdiv(N, BLOCK_N))](
        x, mask, inv, muinv, const, s0, s1, s2, N, C, D,
        x.stride(0), x.stride(1), inv.stride(0), inv.stride(1),
        BLOCK_N=BLOCK_N, BLOCK_C=BLOCK_C, BLOCK_D=BLOCK_D,
    )
    new_pi = torch.empty(B, C, dtype=f32, device=x.device)
    new_mu, new_var = torch.empty_like(s1), torch.empty_like(s1)
    _mstep_kernel[(B,)](s0, s1, s2, prototypes.to(f32).contiguous(), new_pi, new_mu, new_var, C, D,
                        float(tau), float(eps), BLOCK_C=BLOCK_C, BLOCK_D=BLOCK_D)
    return new_pi.to(x.dtype), new_mu.to(x.dtype), new_var.to(x.dtype)
