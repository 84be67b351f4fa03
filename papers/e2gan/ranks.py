"""Rank assignments: each layer's useful rank, parameter counts, and random ranks matched in size.

A layer's LoRA at rank r has r·(C_in·k² + C_out) parameters (A and B, no bias), and a rank above its
useful rank (`lora.useful_rank`) is cut to it, so a group rank r costs Σ_layers min(r, cap_l)·c_l.
The random arm draws uniformly among the distinct rank assignments (each group r₀ × one of `mults`, cut
to the group's largest cap) whose count is within `tolerance` of the target, excluding the target
assignment itself.
"""
from __future__ import annotations

import itertools

import numpy as np


def rank_params(ranks: dict, layers: dict) -> int:
    """LoRA parameters of group `ranks`; `layers`: `lora.layer_ranks(model, {group: 1, ...})`."""
    return int(sum(min(int(ranks.get(i["group"], 0)), i["cap"]) * i["params_per_rank"] for i in layers.values()))


def group_caps(layers: dict) -> dict[str, int]:
    """{group: its largest layer cap}: a group rank above it changes nothing."""
    caps: dict[str, int] = {}
    for i in layers.values():
        caps[i["group"]] = max(caps.get(i["group"], 0), i["cap"])
    return caps


def cut_to_caps(ranks: dict, caps: dict) -> dict:
    return {g: min(int(r), caps.get(g, int(r))) for g, r in ranks.items()}


def matched_random_ranks(layers: dict, target: dict, base_rank: int, mults, tolerance: float,
                         rng: np.random.Generator) -> tuple[dict, bool]:
    """(ranks, matched): a uniform draw among assignments within ±tolerance of `target`'s parameter
    count; if none exists, the nearest one (matched False)."""
    caps = group_caps(layers)
    groups = list(target)
    goal = rank_params(target, layers)
    options = sorted({max(1, int(round(base_rank * m))) for m in mults})
    cands = {tuple(cut_to_caps(dict(zip(groups, combo)), caps).values())
             for combo in itertools.product(options, repeat=len(groups))}
    own = tuple(cut_to_caps(dict(target), caps).values())
    cands = [dict(zip(groups, c)) for c in sorted(cands) if c != own]
    if not cands:  # no other assignment exists
        return dict(target), False
    gaps = np.array([abs(rank_params(c, layers) - goal) / goal for c in cands])
    ok = np.flatnonzero(gaps <= tolerance)
    if len(ok):
        return cands[int(rng.choice(ok))], True
    return cands[int(np.argmin(gaps))], False
