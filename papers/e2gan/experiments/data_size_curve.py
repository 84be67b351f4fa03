"""The data-size curve: LoRA on k-means-selected subsets against random ones."""
from __future__ import annotations

import pandas as pd

from shared.samples import sample
from shared.seeding import derive_seed

from ..metrics import image_features
from ..selection import nearest_to_centroids, random_subset
from .arms import finetune
from .bases import load_base
from .setup import Setup, ci_text, difference, evaluate, read_metrics

def data_size_curve(run) -> dict:
    """Searched-rank LoRA on the m samples nearest k-means centroids of standardised image features, vs m
    random ones (a fresh random subset per seed), on every new concept and seed. Every subset trains the
    same number of steps as the concept table's LoRA arms (`finetune.steps`, the same minibatch seed):
    equal steps, so the curve asks what less data costs in quality at a fixed training cost (the
    paper's "less data" claim), and `all_minus_kmeans_claim_size_db` is the gap at `data_curve.claim_size`."""
    import matplotlib.pyplot as plt

    setup, cfg = Setup(run), run.cfg
    base = load_base(run, setup, "clustered")
    searched = read_metrics(run, "rank_search")["ranks"]
    lr = read_metrics(run, "lr_grid")["chosen"]["lora_searched"]
    seeds = list(cfg.concepts.seeds)
    feats = image_features(setup.train_inputs)
    n = len(setup.train_inputs)
    sizes = [m for m in cfg.data_curve.sizes if m < n] + [n]
    kmeans = {m: nearest_to_centroids(feats, m, run.seed) for m in sizes if m < n}
    rows = []
    for concept in cfg.data_curve.concepts or cfg.concepts.new:
        train, test = setup.pairs(concept, "train"), setup.pairs(concept, "test")
        for seed in seeds:
            for m in sizes:
                steps = cfg.finetune.steps
                for method in ("kmeans", "random"):
                    if m == n and method == "random":
                        continue
                    idx = (list(range(n)) if m == n else kmeans[m] if method == "kmeans"
                           else random_subset(n, m, derive_seed(seed, "data subset", m)))
                    G, h = finetune(setup, base, "lora_searched", searched, train.subset(idx), test, steps, seed,
                                    lr=lr, concept=concept)
                    q = evaluate(G, test, setup)
                    rows += [{"concept": concept, "seed": seed, "m": m, "method": meth, "steps": steps,
                              "train_flops": steps * h["flops_per_step"], **q}
                             for meth in (["kmeans", "random"] if m == n else [method])]
    df = pd.DataFrame(rows)
    mean = df.drop(columns=["concept", "seed"]).groupby(["method", "m"]).mean(numeric_only=True).reset_index()
    per = {(meth, m): sample(g.groupby("seed")["psnr"].mean().loc[seeds], "seed")
           for (meth, m), g in df.groupby(["method", "m"])}
    mean["psnr_ci90_over_seeds"] = [ci_text(per[(r.method, r.m)]["values"]) for r in mean.itertuples()]
    mean["n_seeds"] = len(seeds)
    run.save_table(mean, "e2gan_data_size")
    fig, ax = plt.subplots(figsize=(4, 3))
    for method, g in mean.groupby("method"):
        ax.plot(g["m"], g["psnr"], marker="o", label=method)
    ax.set_xscale("log")
    ax.set_xlabel(f"training pairs m ({cfg.finetune.steps} steps each)")
    ax.set_ylabel("PSNR vs teacher (dB)")
    ax.legend()
    run.save_figure(fig, "e2gan_data_size")
    curve = {meth: {str(int(m)): per[(meth, m)] for (mm, m) in per if mm == meth} for meth in ("kmeans", "random")}
    small = str(sizes[0])
    return {"psnr": curve, "sizes": sizes, "kmeans_minus_random_smallest_m_db":
            difference(curve["kmeans"][small], curve["random"][small]),
            "all_minus_kmeans_by_m_db": {str(m): difference(curve["kmeans"][str(n)], curve["kmeans"][str(m)])
                                         for m in sizes[:-1]},
            "claim_size": int(cfg.data_curve.claim_size), "n_pairs": n,
            "all_minus_kmeans_claim_size_db": difference(curve["kmeans"][str(n)],
                                                         curve["kmeans"][str(int(cfg.data_curve.claim_size))])}


