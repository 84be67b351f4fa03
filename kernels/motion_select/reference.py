"""EVEREST's redundancy-robust token selection, pure torch (brief everest §1, §4).

1. score  s_{t,l} = ‖e_{t,l} - e_{t-1,l}‖₂ (fp32), s_{0,l} := s_{1,l}        E [B,T',L,D] -> [B,T'L]
2. keep   stable descending top-K per clip, K = ⌊ρ_pre N⌋ (lower index wins ties)
3. split  permute the kept tokens by the supplied uniform noise [B,K]; the first V = ⌊(1-mask_ratio) N⌋
          are visible, the rest targets; both returned sorted ascending (raster order)
4. target per-token, per-channel normalised pixels (mean, unbiased std + 1e-6) of the targets only
"""
from __future__ import annotations

import torch


def token_counts(n_tokens: int, rho_pre: float, mask_ratio: float) -> tuple[int, int]:
    """(K kept, V visible) for N tokens."""
    k = int(rho_pre * n_tokens)
    v = int((1 - mask_ratio) * n_tokens)
    if not 0 < v <= k <= n_tokens:
        raise ValueError(f"need 0 < V={v} <= K={k} <= N={n_tokens} (rho_pre={rho_pre}, mask_ratio={mask_ratio})")
    return k, v


def motion_scores(emb: torch.Tensor) -> torch.Tensor:
    """[B,T',L,D] -> [B,T'·L] temporal-difference L2 norms, in fp32."""
    if emb.shape[1] < 2:
        raise ValueError(f"need at least 2 temporal slices, got {emb.shape[1]}")
    e = emb.detach().float()
    diff = (e[:, 1:] - e[:, :-1]).norm(dim=-1)                   # [B,T'-1,L]
    return torch.cat([diff[:, :1], diff], dim=1).flatten(1)


def split_tokens(scores: torch.Tensor, noise: torch.Tensor, v: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-K by score (stable), permuted by noise [B,K]; returns (visible [B,V], target [B,K-V]) indices, ascending."""
    k = noise.shape[1]
    kept = torch.sort(scores, dim=-1, descending=True, stable=True).indices[:, :k]
    perm = kept.gather(1, torch.argsort(noise, dim=-1, stable=True))
    return perm[:, :v].sort(-1).values, perm[:, v:].sort(-1).values


def normalized_targets(pixels: torch.Tensor, target_idx: torch.Tensor) -> torch.Tensor:
    """pixels [B,N,P,C] (one tubelet's P pixels per token) -> [B,K-V,P·C] normalised per token and channel."""
    x = pixels.gather(1, target_idx[:, :, None, None].expand(-1, -1, *pixels.shape[2:])).float()
    x = (x - x.mean(dim=-2, keepdim=True)) / (x.var(dim=-2, unbiased=True, keepdim=True).sqrt() + 1e-6)
    return x.flatten(2)


def motion_select(emb: torch.Tensor, pixels: torch.Tensor, noise: torch.Tensor, mask_ratio: float = 0.9):
    """All four steps. noise [B,K] sets K; returns (scores, visible_idx, target_idx, targets)."""
    n = emb.shape[1] * emb.shape[2]
    v = int((1 - mask_ratio) * n)
    scores = motion_scores(emb)
    visible, target = split_tokens(scores, noise, v)
    return scores, visible, target, normalized_targets(pixels, target)
