"""Batched entropic unbalanced Sinkhorn, pure torch, matching POT's
`ot.unbalanced.sinkhorn_knopp_unbalanced(a, b, M, reg, reg_m, reg_type='entropy')` per problem:

    K = exp(-M / reg),  fi = reg_m / (reg_m + reg),  u = v = 1
    repeat: u = (a / K v)^fi ;  v = (b / Kᵀ u)^fi
            stop when ½(Δu + Δv) < stopThr, Δu = max|u - u'| / max(max|u|, max|u'|, 1);
            on a zero in Kᵀu or a non-finite u, v: keep the previous u, v and stop
    plan = diag(u) K diag(v)

Each problem stops on its own, as POT's per-problem loop does. Differentiable by unrolled
autograd, as the MMP code (POT, torch backend) is.
"""
from __future__ import annotations

import torch


def sinkhorn_unbalanced(a: torch.Tensor, b: torch.Tensor, M: torch.Tensor, reg: float = 0.1, reg_m: float = 0.5,
                        num_iter_max: int = 1000, stop_thr: float = 1e-6) -> torch.Tensor:
    """a [B,n], b [B,m], M [B,n,m] -> transport plans [B,n,m]."""
    K = torch.exp(-M / reg)
    fi = reg_m / (reg_m + reg)
    u = torch.ones_like(a)
    v = torch.ones_like(b)
    active = torch.ones(a.shape[0], dtype=torch.bool, device=a.device)
    for _ in range(num_iter_max):
        if not bool(active.any()):
            break
        u_prev, v_prev = u, v
        u_new = (a / torch.einsum("bij,bj->bi", K, v)) ** fi
        ktu = torch.einsum("bij,bi->bj", K, u_new)
        v_new = (b / ktu) ** fi
        bad = (ktu == 0).any(-1) | ~torch.isfinite(u_new).all(-1) | ~torch.isfinite(v_new).all(-1)
        step = active & ~bad
        u = torch.where(step[:, None], u_new, u_prev)
        v = torch.where(step[:, None], v_new, v_prev)
        one = torch.ones((), dtype=a.dtype, device=a.device)

        def rel(new, old):
            scale = torch.maximum(torch.maximum(new.abs().amax(-1), old.abs().amax(-1)), one)
            return (new - old).abs().amax(-1) / scale

        err = 0.5 * (rel(u_new, u_prev) + rel(v_new, v_prev))
        active = step & (err.detach() >= stop_thr)
    return u[:, :, None] * K * v[:, None, :]
