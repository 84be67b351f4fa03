"""Batched entropic unbalanced Sinkhorn (MMP-OT). Gradients: unrolled autograd through the
reference, which is what the MMP code does (POT's loop on the torch backend); the Triton kernel
is forward-only and serves inference (no grad) calls."""
from __future__ import annotations

import torch

from ..dispatch import backend
from .reference import sinkhorn_unbalanced as sinkhorn_unbalanced_reference


def sinkhorn_unbalanced(a: torch.Tensor, b: torch.Tensor, M: torch.Tensor, reg: float = 0.1, reg_m: float = 0.5,
                        num_iter_max: int = 1000, stop_thr: float = 1e-6) -> torch.Tensor:
    """a [B,n], b [B,m], M [B,n,m] -> plans [B,n,m]; see `reference.sinkhorn_unbalanced`."""
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (a, b, M))
    if needs_grad or backend(a, b, M) == "reference":
        return sinkhorn_unbalanced_reference(a, b, M, reg, reg_m, num_iter_max, stop_thr)
    from .triton_kernel import sinkhorn_unbalanced as sinkhorn_triton

    return sinkhorn_triton(a, b, M, reg, reg_m, num_iter_max, stop_thr)


__all__ = ["sinkhorn_unbalanced", "sinkhorn_unbalanced_reference"]
