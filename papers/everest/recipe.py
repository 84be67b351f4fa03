"""The per-step recipe both training phases share: the masks of a pre-training batch (tube / EVEREST /
ascending selection), the frame pairs of candidate clips, parameter groups (no weight decay on
biases, norms and the mask token; layer-wise lr decay at fine-tuning) and the cosine lr schedule.

Read by `modules.py` (the LightningModules) and `train.py` (which drives them); it imports neither.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from .model import MaskedVideoAutoencoder
from .selection import (count, motion_scores, select_frame_pairs, select_tokens, tube_mask,
                        uniform_frame_pairs)

METHODS = ("tube", "everest", "ascending")
FRAME_SELECTORS = ("information", "uniform")


def make_masks(model: MaskedVideoAutoencoder, video: torch.Tensor, method: str, sel, generator=None):
    """Patch embeddings and the (visible, target) masks of one pre-training batch.

    tube: VideoMAE tube masking; everest: motion top-K + random split; ascending: the bottom-K
    (paper ablation). With `sel.match_visible`, EVEREST's V equals tube masking's V so only the
    choice of tokens differs between arms."""
    enc = model.encoder
    e = model.embed(video)
    b = video.shape[0]
    if method == "tube":
        vis, tgt = tube_mask(b, enc.slices, enc.positions, sel.mask_ratio, generator)
        return e, vis.to(video.device), tgt.to(video.device)
    if method not in METHODS:
        raise ValueError(f"method {method!r}; choose one of {METHODS}")
    v = tube_visible(enc.slices, enc.positions, sel.mask_ratio) if sel.match_visible else None
    scores = motion_scores(e).cpu()
    vis, tgt = select_tokens(scores, sel.rho_pre, sel.mask_ratio, generator, num_visible=v,
                             descending=method == "everest", per_slice=sel.per_slice)
    return e, vis.to(video.device), tgt.to(video.device)


def tube_visible(slices: int, positions: int, mask_ratio: float) -> int:
    """Tube masking's visible tokens V = T'·(L − ⌊mask_ratio·L⌋)."""
    return slices * (positions - count(mask_ratio, positions))


def param_groups(model: nn.Module, weight_decay: float, layer_decay: float | None = None, depth: int = 0):
    """No weight decay on biases, norms, mask token; optional layer-wise lr decay (fine-tuning)."""
    groups = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        no_wd = p.ndim == 1 or name.endswith("mask_token")
        layer = depth + 1
        if layer_decay is not None:
            if name.startswith("encoder.embed"):
                layer = 0
            elif name.startswith("encoder.blocks."):
                layer = int(name.split(".")[2]) + 1
        scale = 1.0 if layer_decay is None else layer_decay ** (depth + 1 - layer)
        key = (no_wd, scale)
        groups.setdefault(key, {"params": [], "weight_decay": 0.0 if no_wd else weight_decay, "lr_scale": scale})
        groups[key]["params"].append(p)
    return list(groups.values())


def lr_at(step: int, steps: int, lr: float, min_lr: float, warmup: int) -> float:
    if step < warmup:
        return lr * (step + 1) / warmup
    t = (step - warmup) / max(1, steps - warmup)
    return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * t))


def set_lr(opt, lr: float) -> None:
    """Each group at `lr` times its layer-decay scale."""
    for g in opt.param_groups:
        g["lr"] = lr * g["lr_scale"]


def choose_pairs(model: MaskedVideoAutoencoder, clips: torch.Tensor, frames: str, rho_pre: float,
                 generator: torch.Generator) -> torch.Tensor:
    """The τ frame pairs [b, τ] of candidate clips [b, C, 2·α·τ, H, W]: `information` (frame
    selection with the current embedding) or `uniform` (the ablation)."""
    pairs = model.encoder.slices
    if frames == "information":
        with torch.no_grad():
            scores = motion_scores(model.embed(clips)).cpu()            # [b, α·τ, L]
        return torch.stack([select_frame_pairs(s, pairs, rho_pre, generator) for s in scores])
    if frames == "uniform":
        return torch.stack([uniform_frame_pairs(clips.shape[2] // 2, pairs, generator) for _ in range(len(clips))])
    raise ValueError(f"frames={frames!r}; choose one of {FRAME_SELECTORS}")
