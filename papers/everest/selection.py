"""Redundancy-robust token selection (EVEREST §3) and VideoMAE tube masking.

Tokens e_{t,l} are the patch embeddings (before the positional embedding), t = 0..T'-1 temporal
slices, l = 0..L-1 positions, N = T'·L.

    score       s_{t,l} = ‖e_{t,l} − e_{t−1,l}‖₂  (t ≥ 1),   s_{0,l} := s_{1,l}      (detached)
    keep        one stable top-K per clip, K = ⌊ρ_pre·N⌋; the N−K others are discarded
    split       random permutation of the K kept: the first V = ⌊(1−mask_ratio)·N⌋ are visible,
                the K−V others are reconstruction targets (ρ_post = 1 − V/K)
    fine-tune   keep the deterministic top ⌊keep_ratio·N⌋ (0.6) at train and test time

All masks are boolean [B, N] in raster order (t major, l minor), so `x[mask].view(B, -1, D)` keeps
tokens in raster order. Ties are broken stably (lower raster index first); the official code's
argsort is unstable, and it hard-codes T' = 8 (`[:, :7]`), generalised here to any T'.

Information-intensive frame selection (paper §3.3, not in the released code): from 2ατ uniformly
sampled candidate frames (ατ pairs), count c_i of the top-ρ_pre tokens in pair i, draw τ pairs
without replacement with probability c_i / Σc. Here ties in that top-ρ_pre (exact zeros of static
frames without noise) are broken at random, so no pair gains counts from its position in time;
`uniform_frame_pairs` is the ablation (τ of the ατ pairs uniformly at random).
"""
from __future__ import annotations

import math

import torch

from kernels.motion_select import motion_scores as kernel_motion_scores

EPS = 1e-9


def count(ratio: float, n: int) -> int:
    """⌊ratio·n⌋, robust to float error (⌊(1 − 0.9)·10⌋ = 1, not 0)."""
    return int(math.floor(ratio * n + EPS))


def motion_scores(embeddings: torch.Tensor) -> torch.Tensor:
    """[B, T, L, D] patch embeddings -> [B, T, L] fp32 scores; slice 0 copies slice 1 (T ≥ 2)."""
    if embeddings.dim() != 4 or embeddings.shape[1] < 2:
        raise ValueError(f"expected embeddings [B, T>=2, L, D], got {tuple(embeddings.shape)}")
    b, t, l, _ = embeddings.shape
    # fp32 ‖e_t - e_{t-1}‖₂ with slice 0 copying slice 1: Triton on CUDA, the torch reference elsewhere
    return kernel_motion_scores(embeddings).view(b, t, l)


def _flat(scores: torch.Tensor) -> torch.Tensor:
    return scores.reshape(scores.shape[0], -1) if scores.dim() == 3 else scores


def top_tokens(scores: torch.Tensor, k: int, descending: bool = True) -> torch.Tensor:
    """Indices [B, k] of the stable top-k per row (ties: lower raster index first)."""
    order = torch.sort(_flat(scores), dim=1, descending=descending, stable=True).indices
    return order[:, :k]


def _to_mask(idx: torch.Tensor, n: int) -> torch.Tensor:
    mask = torch.zeros(idx.shape[0], n, dtype=torch.bool, device=idx.device)
    return mask.scatter_(1, idx, True)


def select_tokens(scores: torch.Tensor, rho_pre: float = 0.3, mask_ratio: float = 0.9,
                  generator: torch.Generator | None = None, *, num_visible: int | None = None,
                  descending: bool = True, per_slice: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """EVEREST pre-training selection. scores [B, T, L] (or [B, N]) -> (visible, target) [B, N] bool.

    K = ⌊rho_pre·N⌋ kept, V = ⌊(1−mask_ratio)·N⌋ visible (or `num_visible`, to match another arm's
    V), K−V targets. `descending=False` is the paper's ascending ablation; `per_slice=True` takes
    ⌊rho_pre·L⌋ per temporal slice (the paper's m ∈ R^{J×τ} reading) instead of one global top-K.
    """
    flat = _flat(scores)
    b, n = flat.shape
    v = count(1.0 - mask_ratio, n) if num_visible is None else int(num_visible)
    if per_slice:
        if scores.dim() != 3:
            raise ValueError("per_slice selection needs scores shaped [B, T, L]")
        t, l = scores.shape[1:]
        kl = count(rho_pre, l)
        idx = top_tokens(scores.reshape(b * t, l), kl, descending).reshape(b, t, kl)
        keep = (idx + torch.arange(t, device=idx.device).view(1, t, 1) * l).reshape(b, t * kl)
    else:
        keep = top_tokens(flat, count(rho_pre, n), descending)
    k = keep.shape[1]
    if not 0 < v <= k:
        raise ValueError(f"need 0 < V={v} <= K={k} (rho_pre={rho_pre}, mask_ratio={mask_ratio}, N={n})")
    noise = torch.rand(b, k, generator=generator, device=flat.device)
    perm = torch.argsort(noise, dim=1)
    shuffled = keep.gather(1, perm)
    return _to_mask(shuffled[:, :v], n), _to_mask(shuffled[:, v:], n)


def tube_mask(batch: int, slices: int, positions: int, mask_ratio: float = 0.9,
              generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """VideoMAE tube masking: one random spatial mask of ⌊mask_ratio·L⌋ positions per clip,
    repeated over the T' slices. Returns (visible, target = every masked token) [B, T'·L]."""
    masked = count(mask_ratio, positions)
    noise = torch.rand(batch, positions, generator=generator)
    order = torch.argsort(noise, dim=1)
    spatial_vis = _to_mask(order[:, masked:], positions)
    visible = spatial_vis.unsqueeze(1).expand(batch, slices, positions).reshape(batch, -1)
    return visible, ~visible


def keep_top_mask(scores: torch.Tensor, keep_ratio: float = 0.6, descending: bool = True) -> torch.Tensor:
    """Token-pruned fine-tuning/inference: the deterministic top ⌊keep_ratio·N⌋ tokens [B, N]."""
    flat = _flat(scores)
    return _to_mask(top_tokens(flat, count(keep_ratio, flat.shape[1]), descending), flat.shape[1])


def random_keep_mask(batch: int, n: int, keep_ratio: float = 0.6,
                     generator: torch.Generator | None = None) -> torch.Tensor:
    """Control: ⌊keep_ratio·N⌋ tokens kept uniformly at random per clip."""
    idx = torch.argsort(torch.rand(batch, n, generator=generator), dim=1)[:, :count(keep_ratio, n)]
    return _to_mask(idx, n)


def frame_pair_probabilities(scores: torch.Tensor, rho_pre: float = 0.3,
                             generator: torch.Generator | None = None) -> torch.Tensor:
    """scores [P, L] of one clip's P candidate frame pairs -> sampling probabilities [P].

    c_i = number of the clip's top-⌊rho_pre·P·L⌋ tokens that lie in pair i; p_i = c_i / Σc. Tied
    scores are ordered at random (a random permutation before the stable sort), not by time."""
    p, l = scores.shape
    flat = scores.reshape(-1)
    perm = torch.randperm(flat.numel(), generator=generator).to(flat.device)
    order = torch.sort(flat[perm], descending=True, stable=True).indices
    keep = perm[order[:count(rho_pre, p * l)]]
    counts = torch.bincount(torch.div(keep, l, rounding_mode="floor"), minlength=p).float()
    return counts / counts.sum()


def select_frame_pairs(scores: torch.Tensor, num_pairs: int, rho_pre: float = 0.3,
                       generator: torch.Generator | None = None) -> torch.Tensor:
    """Draw `num_pairs` of the P candidate pairs without replacement, p_i ∝ c_i; sorted in time.

    Pairs with c_i = 0 are drawn only once every pair with c_i > 0 is taken."""
    probs = frame_pair_probabilities(scores, rho_pre, generator)
    probs = probs + 1e-12 * (probs == 0)
    return torch.multinomial(probs, num_pairs, replacement=False, generator=generator).sort().values


def uniform_frame_pairs(num_candidates: int, num_pairs: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """The ablation: `num_pairs` of the candidate pairs uniformly without replacement, sorted in time."""
    return torch.randperm(num_candidates, generator=generator)[:num_pairs].sort().values


def pair_frames(video: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
    """video [C, 2·P, H, W] and pair indices [τ] -> the clip of those pairs [C, 2τ, H, W]."""
    return video[:, torch.stack([2 * pairs, 2 * pairs + 1], dim=1).reshape(-1)]


def information_intensive_pairs(video: torch.Tensor, embed, num_pairs: int, rho_pre: float = 0.3,
                                generator: torch.Generator | None = None) -> torch.Tensor:
    """video [C, 2·P, H, W] of P = α·τ candidate frame pairs -> the drawn pair indices [num_pairs].

    `embed` maps [1, C, 2P, H, W] to patch embeddings [1, P, L, D] (the model's tubelet embedding,
    tubelet size 2, so one temporal slice = one frame pair)."""
    with torch.no_grad():
        scores = motion_scores(embed(video.unsqueeze(0)))[0]
    return select_frame_pairs(scores, num_pairs, rho_pre, generator)


def information_intensive_frames(video: torch.Tensor, embed, num_pairs: int, rho_pre: float = 0.3,
                                 generator: torch.Generator | None = None) -> torch.Tensor:
    """video [C, 2·P, H, W] -> [C, 2·num_pairs, H, W]: the pairs `information_intensive_pairs` draws."""
    return pair_frames(video, information_intensive_pairs(video, embed, num_pairs, rho_pre, generator))
