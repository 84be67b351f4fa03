"""Which base to adapt from: the clustered base against random ones."""
from __future__ import annotations

import numpy as np
import pandas as pd

from shared.samples import combine

from .arms import finetune
from .bases import base_kinds, load_base
from .setup import Setup, ci_text, difference, evaluate, read_metrics, seed_samples

def base_ablation(run) -> dict:
    """Which base to adapt from: clustered concepts vs `base.random_draws` random draws (and
    `base.extra_kinds`): the same searched-rank LoRA at its tuned lr, from every base, on every new
    concept and seed (common random numbers: one seed gives every base the same minibatches).

    The claim's sample is over seeds, paired: value i = clustered − the mean of the random draws, at
    seed i, each the mean over new concepts. The bases are trained once each (at the run's seed), so
    the per-draw gaps (`clustered_minus_random_by_draw`) show how much the choice of random concepts
    moves it."""
    setup, cfg = Setup(run), run.cfg
    searched = read_metrics(run, "rank_search")["ranks"]
    lr = read_metrics(run, "lr_grid")["chosen"]["lora_searched"]
    seeds = list(cfg.concepts.seeds)
    kinds = base_kinds(cfg)
    rows = []
    for kind in kinds:
        base = load_base(run, setup, kind)
        for concept in cfg.concepts.new:
            train, test = setup.pairs(concept, "train"), setup.pairs(concept, "test")
            for seed in seeds:
                G, _ = finetune(setup, base, "lora_searched", searched, train, test, cfg.finetune.steps, seed,
                                lr=lr, concept=concept)
                rows.append({"concept": concept, "seed": seed, "base": kind, **evaluate(G, test, setup)})
    df = pd.DataFrame(rows)
    per = seed_samples(df, "base", seeds, ("psnr", "ssim", "fd"))
    wide = df.groupby(["concept", "base"], sort=False)["psnr"].mean().unstack("base")[list(kinds)]
    wide = wide.loc[list(cfg.concepts.new)].reset_index()
    wide.loc[len(wide)] = ["mean over concepts", *[per[k]["psnr"]["mean"] for k in kinds]]
    wide.loc[len(wide)] = ["90 % CI over seeds", *[ci_text(per[k]["psnr"]["values"]) for k in kinds]]
    run.save_table(wide, "e2gan_base_ablation")
    run.save_table(df, "e2gan_base_ablation_runs")
    randoms = [k for k in kinds if k.startswith("random")]
    clustered = per["clustered"]["psnr"]
    mean_random = combine([per[k]["psnr"] for k in randoms], lambda *v: float(np.mean(v)))
    others = [k for k in kinds if k != "clustered"]
    n_concepts = len(cfg.concepts.new)
    clustered_wins = int(sum(wide.iloc[i]["clustered"] >= wide.iloc[i][others].max() for i in range(n_concepts)))
    return {"bases": {k: per[k] for k in kinds},
            "random_draws_psnr": mean_random,
            "clustered_minus_random_psnr_db": difference(clustered, mean_random),
            "clustered_minus_random_by_draw": {k: difference(clustered, per[k]["psnr"]) for k in randoms},
            "concepts_where_clustered_best": clustered_wins, "n_concepts": n_concepts}


