"""The rank search on held-out concepts, for efficiency: ranks cut to each layer's useful rank, and a
budget and an objective in training FLOPs per step.

Every crucial group starts at r₀ ("1×"). Each round tries ×m (`search.multipliers`) on one group at a
time. A candidate is skipped without training when the cut to the group's largest useful rank leaves
it unchanged (`at_cap`), or when one training step of it costs more than `search.max_flops_ratio` × a
full fine-tune's step (`over_flops_budget`): an adapter that costs more per step than fine-tuning
every weight defeats the method. The others are scored by a short fine-tune (`search.steps`) on every
search concept × `search.seeds`: the mean test PSNR. The round keeps, among the candidates that gain
more than `search.min_gain_db` over the current ranks, the one with the largest gain per added GFLOP
per step; the search stops when none does, or after `search.rounds` rounds.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..models import CRUCIAL_GROUPS
from ..ranks import cut_to_caps, group_caps, rank_params
from ..train import eval_psnr
from .arms import finetune, lora_alpha, lora_layers, per_layer_ranks, step_flops
from .bases import load_base
from .setup import Setup


def rank_search(run) -> dict:
    """The search on `concepts.search` × `search.seeds`; tables `e2gan_rank_search` (the searched rank of
    every layer beside its cap) and `e2gan_rank_search_probes` (every candidate, trained or skipped)."""
    setup, cfg = Setup(run), run.cfg
    base = load_base(run, setup, "clustered")
    sets = [(setup.pairs(c, "train"), setup.pairs(c, "test"), c) for c in cfg.concepts.search]
    result = search_ranks(setup, base, sets, cfg.search, cfg.lora.base_rank, list(cfg.search.seeds))
    start = result["history"][0]
    per_layer = pd.DataFrame(result["per_layer"])
    per_layer.loc[len(per_layer)] = {"layer": "total", "group": "", "rank": np.nan, "cap": np.nan,
                                     "params": result["params"]}
    run.save_table(per_layer, "e2gan_rank_search")
    probes = pd.DataFrame(result["history"])
    probes["flops_ratio_to_full_ft"] = probes["flops_per_step"] / result["full_ft_flops_per_step"]
    run.save_table(probes, "e2gan_rank_search_probes")
    result["flops_per_step_start"] = start["flops_per_step"]
    return result


def search_ranks(setup: Setup, base: dict, sets, search_cfg, base_rank: int, seeds) -> dict:
    """The greedy search (module docstring) over `sets` [(train, test, concept)] × `seeds`."""
    layers = {n: i for n, i in lora_layers(setup).items() if i["group"] in CRUCIAL_GROUPS}
    caps = group_caps(layers)
    prompt = sets[0][2]
    full_flops = step_flops(setup, None, prompt)
    budget = float(search_cfg.max_flops_ratio) * full_flops
    train_flops = [0]
    flops_cache: dict[tuple, int] = {}

    def flops_of(ranks: dict) -> int:
        key = tuple(ranks[g] for g in CRUCIAL_GROUPS)
        if key not in flops_cache:
            flops_cache[key] = step_flops(setup, ranks, prompt)
        return flops_cache[key]

    def score(ranks: dict) -> float:
        vals = []
        for train, test, concept in sets:
            for seed in seeds:
                G, h = finetune(setup, base, "lora_searched", ranks, train, test, search_cfg.steps, seed,
                                concept=concept)
                train_flops[0] += h["steps"] * h["flops_per_step"]
                vals.append(eval_psnr(G, test))
        return float(np.mean(vals))

    ranks = cut_to_caps({g: base_rank for g in CRUCIAL_GROUPS}, caps)
    current, flops = score(ranks), flops_of(ranks)
    history = [{"round": 0, "group": None, "rank": None, "psnr": current, "params": rank_params(ranks, layers),
                "flops_per_step": flops, "gain_db": None, "gain_per_gflop": None, "skipped": None}]
    for rnd in range(1, search_cfg.rounds + 1):
        best = None
        for g in CRUCIAL_GROUPS:
            for mult in search_cfg.multipliers:
                cand = cut_to_caps({**ranks, g: ranks[g] * mult}, caps)
                row = {"round": rnd, "group": g, "rank": cand[g], "psnr": None, "params": rank_params(cand, layers),
                       "flops_per_step": None, "gain_db": None, "gain_per_gflop": None, "skipped": None}
                history.append(row)
                if cand[g] == ranks[g]:
                    row["skipped"] = "at_cap"
                    continue
                row["flops_per_step"] = f = flops_of(cand)
                if f > budget:
                    row["skipped"] = "over_flops_budget"
                    continue
                s = score(cand)
                gain = s - current
                per_gflop = gain / max(f - flops, 1) * 1e9
                row.update(psnr=s, gain_db=gain, gain_per_gflop=per_gflop)
                if gain > search_cfg.min_gain_db and (best is None or per_gflop > best[0]):
                    best = (per_gflop, cand, s, f)
        if best is None:
            break
        _, ranks, current, flops = best
    trained = [h for h in history if h["psnr"] is not None]
    return {"ranks": ranks, "caps": caps, "per_layer": per_layer_ranks(setup, ranks),
            "params": rank_params(ranks, layers), "flops_per_step": flops, "full_ft_flops_per_step": full_flops,
            "flops_budget_per_step": budget, "psnr": current, "n_probes": len(history), "n_trained": len(trained),
            "concepts": [c for *_, c in sets], "seeds": list(seeds), "alpha": lora_alpha(setup.cfg),
            "history": history, "train_flops": train_flops[0]}
