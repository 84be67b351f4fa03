"""EVEREST token selection: motion scores, stable top-K, visible/target split, normalised targets."""
from __future__ import annotations

import torch

from ..dispatch import backend
from . import reference
from .reference import split_tokens, token_counts


def motion_scores(emb: torch.Tensor) -> torch.Tensor:
    """[B,T',L,D] -> [B,T'·L] fp32 scores; Triton on CUDA, reference elsewhere."""
    if backend(emb) == "reference":
        return reference.motion_scores(emb)
    from . import triton_kernel

    return triton_kernel.motion_scores(emb)


def normalized_targets(pixels: torch.Tensor, target_idx: torch.Tensor) -> torch.Tensor:
    if backend(pixels) == "reference":
        return reference.normalized_targets(pixels, target_idx)
    from . import triton_kernel

    return triton_kernel.normalized_targets(pixels, target_idx)


def motion_select(emb: torch.Tensor, pixels: torch.Tensor, noise: torch.Tensor, mask_ratio: float = 0.9):
    """(scores [B,N], visible idx [B,V], target idx [B,K-V], targets [B,K-V,P·C]); K = noise.shape[1]."""
    scores = motion_scores(emb)
    visible, target = split_tokens(scores, noise, int((1 - mask_ratio) * emb.shape[1] * emb.shape[2]))
    return scores, visible, target, normalized_targets(pixels, target)


motion_select_reference = reference.motion_select
__all__ = ["motion_select", "motion_select_reference", "motion_scores", "normalized_targets", "split_tokens",
           "token_counts"]
