"""Fused diagonal-GMM EM step (E-step, sufficient statistics, τ-MAP M-step) for MMP/PANTHER."""
from __future__ import annotations

import torch

from ..dispatch import backend
from .reference import gmm_estep as gmm_estep_reference


def gmm_estep(x: torch.Tensor, mask: torch.Tensor | None, pi: torch.Tensor, mu: torch.Tensor, var: torch.Tensor,
              prototypes: torch.Tensor, tau: float = 1e-3, eps: float = 0.1, precision: str = "ieee"):
    """One EM step on padded bags; see `reference.gmm_estep`. Triton on CUDA (fp32), reference elsewhere.

    float64 inputs always take the reference (the kernel accumulates in fp32). precision ("ieee" or
    "tf32x3") picks the kernel's dot precision; see `triton_kernel`.
    """
    if x.dtype == torch.float64 or backend(x) == "reference":
        return gmm_estep_reference(x, mask, pi, mu, var, prototypes, tau, eps)
    from .triton_kernel import gmm_estep as gmm_estep_triton

    return gmm_estep_triton(x, mask, pi, mu, var, prototypes, tau, eps, precision=precision)


__all__ = ["gmm_estep", "gmm_estep_reference"]
