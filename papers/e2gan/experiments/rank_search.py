"""The rank search on held-out concepts."""
from __future__ import annotations

import numpy as np

from ..models import CRUCIAL_GROUPS
from ..train import eval_psnr
from .arms import count_lora_params, finetune
from .bases import load_base
from .setup import Setup

def rank_search(run) -> dict:
    """Greedy rank search on held-out concepts: start every crucial layer group at r₀ ("1×"), try ×2 / ×4
    on one group at a time (short fine-tunes), keep the best PSNR gain per added parameter; stop when the
    best gain is below `search.min_gain_db`, after `search.rounds` rounds."""
    setup, cfg = Setup(run), run.cfg
    base = load_base(run, setup, "clustered")
    sets = [(setup.pairs(c, "train"), setup.pairs(c, "test"), c) for c in cfg.concepts.search]
    return search_ranks(setup, base, sets, cfg.search, cfg.lora.base_rank, run.seed, cfg.fd_dims)


def search_ranks(setup: Setup, base: dict, sets, search_cfg, base_rank: int, seed: int, fd_dims: int = 16) -> dict:
    flops = [0]

    def score(ranks):
        vals = []
        for train, test, *concept in sets:
            G, h = finetune(setup, base, "lora_searched", ranks, train, test, search_cfg.steps, seed,
                            concept=concept[0] if concept else "")
            flops[0] += h["steps"] * h["flops_per_step"]
            vals.append(eval_psnr(G, test))
        return float(np.mean(vals))

    ranks = {g: base_rank for g in CRUCIAL_GROUPS}
    current, params = score(ranks), count_lora_params(setup, ranks)
    history = [{"round": 0, "group": None, "rank": None, "psnr": current, "params": params, "gain_per_kparam": None}]
    for rnd in range(1, search_cfg.rounds + 1):
        best = None
        for g in CRUCIAL_GROUPS:
            for mult in search_cfg.multipliers:
                cand = {**ranks, g: ranks[g] * mult}
                if cand[g] > search_cfg.max_rank:
                    continue
                s, p = score(cand), count_lora_params(setup, cand)
                eff = (s - current) / max(p - params, 1) * 1000
                history.append({"round": rnd, "group": g, "rank": cand[g], "psnr": s, "params": p,
                                "gain_per_kparam": eff})
                if best is None or eff > best[0]:
                    best = (eff, cand, s, p)
        if best is None or best[2] - current < search_cfg.min_gain_db:
            break
        _, ranks, current, params = best
    return {"ranks": ranks, "params": params, "psnr": current, "n_probes": len(history), "history": history,
            "train_flops": flops[0]}


