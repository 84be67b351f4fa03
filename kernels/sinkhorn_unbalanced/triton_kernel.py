"""Batched unbalanced Sinkhorn in Triton: one program per problem, K held on chip (brief mmp §4b).

Forward only; same iteration, stopping rule and numerical-error fallback as the reference/POT.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..dispatch import next_pow2


@triton.jit
def _sinkhorn_kernel(a_ptr, b_ptr, M_ptr, P_ptr, n, m, reg, fi, num_iter_max, stop_thr,
                     BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr):
    pid = tl.program_id(0)
    rows = tl.arange(0, BLOCK_N)
    cols = tl.arange(0, BLOCK_M)
    rok = rows < n
    cok = cols < m
    ok = rok[:, None] & cok[None, :]
    Mt = tl.load(M_ptr + pid * n * m + rows[:, None] * m + cols[None, :], mask=ok, other=0.0)
    K = tl.where(ok, tl.exp(-Mt / reg), 0.0)
    a = tl.load(a_ptr + pid * n + rows, mask=rok, other=1.0)
    b = tl.load(b_ptr + pid * m + cols, mask=cok, other=1.0)
    u = tl.where(rok, 1.0, 0.0).to(K.dtype)
    v = tl.where(cok, 1.0, 0.0).to(K.dtype)
    it = 0
    running = 1
    while (it < num_iter_max) & (running == 1):
        kv = tl.sum(K * v[None, :], axis=1)
        u_new = tl.where(rok, tl.exp(fi * tl.log(a / kv)), 0.0)
        ktu = tl.sum(K * u_new[:, None], axis=0)
        v_new = tl.where(cok, tl.exp(fi * tl.log(b / ktu)), 0.0)
        zero_ktu = tl.sum(tl.where(cok & (ktu == 0.0), 1, 0), axis=0) > 0
        bad_u = tl.sum(tl.where(rok & ((u_new != u_new) | (tl.abs(u_new) == float("inf"))), 1, 0), axis=0) > 0
        bad_v = tl.sum(tl.where(cok & ((v_new != v_new) | (tl.abs(v_new) == float("inf"))), 1, 0), axis=0) > 0
        bad = zero_ktu | bad_u | bad_v
        err_u = tl.max(tl.abs(u_new - u), axis=0) / tl.maximum(tl.maximum(tl.max(tl.abs(u_new), axis=0),
                                                                           tl.max(tl.abs(u), axis=0)), 1.0)
        err_v = tl.max(tl.abs(v_new - v), axis=0) / tl.maximum(tl.maximum(tl.max(tl.abs(v_new), axis=0),
                                                                           tl.max(tl.abs(v), axis=0)), 1.0)
        err = 0.5 * (err_u + err_v)
        u = tl.where(bad, u, u_new)
        v = tl.where(bad, v, v_new)
        running = tl.where(bad | (err < stop_thr), 0, 1)
        it += 1
    plan = u[:, None] * K * v[None, :]
    tl.store(P_ptr + pid * n * m + rows[:, None] * m + cols[None, :], plan, mask=ok)


def sinkhorn_unbalanced(a, b, M, reg=0.1, reg_m=0.5, num_iter_max=1000, stop_thr=1e-6):
    """Same signature and semantics as `reference.sinkhorn_unbalanced` (forward only)."""
    B, n, m = M.shape
    a, b, M = a.contiguous(), b.contiguous(), M.contiguous()
    plan = torch.empty_like(M)
    _sinkhorn_kernel[(B,)](a, b, M, plan, n, m, float(reg), float(reg_m / (reg_m + reg)), int(num_iter_max),
                           float(stop_thr), BLOCK_N=next_pow2(n), BLOCK_M=next_pow2(m))
    return plan
