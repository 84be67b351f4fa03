"""Fusion without training: the baselines a bond must beat.

A combination bond needs the expert's encoders at inference, as late fusion does; what a bond adds is a
learned map into U's coordinates. So on tasks inside the expert's space the referee's floor is to score
with both spaces side by side and train nothing:

- **late fusion** `late_fusion(U, [E1, E2], λa, λt)`: each modality's embedding is the concatenation of
  U's embedding weighted √(1-λ) and each expert's weighted √(λ/K) (an expert that lacks the modality
  contributes zeros). With L2-normalised parts the fused vectors have unit norm and, for λa = λt = λ,
  the cosine is (1-λ)·cos_U + λ·mean_k cos_Ek: the classic late fusion of scores. With λa ≠ λt the
  weights are √((1-λa)(1-λt)) and √(λa·λt)/K, the same weights the bond's mixed score puts on its
  U-U and expert-expert terms, without the cross terms a shared coordinate system adds.
- **the experts' average** `late_fusion({}, [E1, E2], 1, 1)`: the experts alone, cos = mean_k cos_Ek.

With λ_image = 0 (the combination bond leaves images untouched too) the fused image is U's image padded
with zeros, so every audio→image and text→image score is U's times √(1-λ): late fusion's image rankings
are U's at every λa, λt < 1. Each reference is also scored at the λ best on validation events, over the
same grid as the bond it is compared with (`lambda_selection.py`).

The result is an embedding dict that `evaluation.evaluate` scores like any space.
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import torch

Emb = Mapping[str, torch.Tensor]


def late_fusion(unified: Emb, experts: Sequence[Emb], lam_a: float, lam_t: float, lam_v: float = 0.0) -> dict:
    """Concatenate U's and the experts' embeddings per modality with √-weights (module docstring).

    `unified` may be empty (the experts' average). A modality is fused when some space holds it; the
    weight of a part that a space lacks is spent on zeros, so every fused vector has the same norm
    (a constant factor per modality, which no ranking or arg-max sees)."""
    lams = {"audio": lam_a, "text": lam_t, "image": lam_v}
    mods = [m for m in ("audio", "image", "text") if m in unified or any(m in e for e in experts)]
    out = {}
    for mod in mods:
        lam = lams[mod] if unified else 1.0
        n = next(x[mod].shape[0] for x in (unified, *experts) if mod in x)
        parts = []
        if unified:
            parts.append(_part(unified, mod, n, math.sqrt(1.0 - lam)))
        for e in experts:
            parts.append(_part(e, mod, n, math.sqrt(lam / len(experts))))
        out[mod] = torch.cat(parts, dim=1)
    return out


def _part(space: Emb, mod: str, n: int, weight: float) -> torch.Tensor:
    if mod in space:
        return weight * space[mod]
    dim = next(iter(space.values())).shape[1]
    return torch.zeros(n, dim)
