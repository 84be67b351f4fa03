"""Random LoRA ranks matched in parameter count to a given (searched) rank assignment.

LoRA adds r·(C_in·k² + C_out) parameters to a layer (A and B, no bias), so a group's adapter size is
linear in its rank: params(ranks) = Σ_g ranks[g]·c_g with c_g the group's size at rank 1. The random
arm draws uniformly among the rank assignments (each group r₀ × one of `mults`) whose count is within
`tolerance` of the target, excluding the target assignment itself.
"""
from __future__ import annotations

import itertools

import numpy as np


def group_costs(count, groups) -> dict[str, int]:
    """{group: LoRA parameters at rank 1}; `count(ranks)` counts a model's LoRA parameters."""
    return {g: int(count({g: 1})) for g in groups}


def rank_params(ranks: dict, costs: dict) -> int:
    return int(sum(r * costs[g] for g, r in ranks.items()))


def matched_random_ranks(costs: dict, target: dict, base_rank: int, mults, tolerance: float,
                         rng: np.random.Generator) -> tuple[dict, bool]:
    """(ranks, matched): a uniform draw among assignments within ±tolerance of `target`'s parameter
    count; if none exists, the nearest one (matched False)."""
    groups = list(target)
    goal = rank_params(target, costs)
    options = sorted({max(1, int(round(base_rank * m))) for m in mults})
    cands = [dict(zip(groups, combo)) for combo in itertools.product(options, repeat=len(groups))]
    cands = [c for c in cands if c != dict(target)]
    if not cands:  # no other assignment exists
        return dict(target), False
    gaps = np.array([abs(rank_params(c, costs) - goal) / goal for c in cands])
    ok = np.flatnonzero(gaps <= tolerance)
    if len(ok):
        return cands[int(rng.choice(ok))], True
    return cands[int(np.argmin(gaps))], False
