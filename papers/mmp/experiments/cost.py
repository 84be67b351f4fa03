"""`cost`: figures/cost and tables/cost (memory and time per patient vs N, log-log slopes, the
end-to-end time ratio), and tables/ot_speed (`ot_speed`)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from shared.seeding import derive_seed

from ..measure import loglog_slope, measure
from ..panther import gmm_aggregate, tokens
from .arms import build_model
from .ot_speed import ot_speedup


def cost_vs_patches(run) -> dict:
    """Per patient, end to end: the GMM aggregation of a bag of N patches, then MMP's fusion on the
    tokens of that bag, against a full-token Transformer on the same bag; peak memory and time of
    one forward pass for each N, and their log-log slopes over `cost.slope_range`. Each of
    `cost.seeds` seeds draws new bags and prototypes; times are the best of at least `cost.repeats`
    calls that add up to `cost.min_time` s (`measure`), one
    slope per seed. Peak memory is deterministic (shapes only): measured on seed 0."""
    cfg, seed = run.cfg, run.seed
    d, n_p = cfg.cost.dim, cfg.data.n_pathways
    pathways = [np.arange(i, i + cfg.data.genes_min) % cfg.data.n_genes for i in range(n_p)]
    cohort_like = type("C", (), {"bags": [np.zeros((1, d), np.float32)], "pathways": pathways})
    mmp = build_model("mmp_trans", cfg, cohort_like, 1, seed).eval()
    full = build_model("full_transformer", cfg, cohort_like, 1, seed).eval()
    agg = dict(tau=cfg.panther.tau, eps=cfg.panther.eps, n_iter=cfg.panther.n_iter)
    reps, least = cfg.cost.repeats, cfg.cost.min_time
    rows = []
    for s in range(cfg.cost.seeds):
        rng = np.random.default_rng(derive_seed(seed, "cost", s))
        protos = rng.normal(size=(cfg.prototypes.n, d)).astype(np.float32)
        genes = torch.from_numpy(rng.normal(size=(1, cfg.data.n_genes)).astype(np.float32))
        for n in cfg.cost.n_patches:
            x = torch.from_numpy(rng.normal(size=(n, d)).astype(np.float32))
            with torch.no_grad():
                hist = tokens(*gmm_aggregate(x, protos, **agg))[None]     # the tokens of this bag
            t_agg, m_agg = measure(lambda: gmm_aggregate(x, protos, **agg), reps, memory=s == 0, min_time=least)
            t_fus, m_fus = measure(lambda: mmp({"hist": hist, "genes": genes}), reps, memory=s == 0, min_time=least)
            t_full, m_full = measure(lambda: full({"bags": [x], "genes": genes}), reps, memory=s == 0, min_time=least)
            rows.append({"seed": s, "N": n, "aggregation_s": t_agg, "fusion_s": t_fus, "mmp_s": t_agg + t_fus,
                         "full_token_s": t_full, "aggregation_MB": m_agg / 2**20, "fusion_MB": m_fus / 2**20,
                         "full_token_MB": m_full / 2**20})
    df = pd.DataFrame(rows)
    # the fixed cost of one aggregation call (a bag of a single patch), same timing rule
    one = torch.from_numpy(np.random.default_rng(derive_seed(seed, "cost", "one")).normal(size=(1, d)).astype(np.float32))
    fixed = measure(lambda: gmm_aggregate(one, protos, **agg), reps, memory=False, min_time=least)[0]
    lo, hi = cfg.cost.slope_range
    slopes = fit_slopes(df, lo, hi)
    # diagnostic (no claim): the same slopes over the upper decade, where fixed per-call costs and
    # the linear terms weigh least
    upper = fit_slopes(df, *cfg.cost.upper_range)
    table = df.groupby("N").agg({"aggregation_s": "median", "fusion_s": "median", "mmp_s": "median",
                                 "full_token_s": "median"}).join(df[df.seed == 0].set_index("N")[
                                     ["aggregation_MB", "fusion_MB", "full_token_MB"]]).reset_index()
    slope_rows = []
    for (a, b), sl, what in (((lo, hi), slopes, "log-log slope"), (tuple(cfg.cost.upper_range), upper,
                                                                    "diagnostic slope (no claim)")):
        row_ = {"N": f"{what}, N in [{a:g}, {b:g}]"}
        for col in ("aggregation", "fusion", "mmp", "full_token"):
            sm = sl[f"{col}_time_slope"]
            row_[f"{col}_s"] = f"{sm['mean']:.3f}" + (f" ± {sm['std']:.3f}" if sm["std"] is not None else "")
        for col in ("aggregation", "fusion", "full_token"):
            row_[f"{col}_MB"] = f"{sl[f'{col}_memory_slope']:.3f}"
        slope_rows.append(row_)
    table = table.astype(object)
    for col in table.columns:
        table[col] = [str(int(v)) if col == "N" else f"{v:.4g}" for v in table[col]]
    table = pd.concat([table, pd.DataFrame(slope_rows)], ignore_index=True)
    run.save_table(table, "cost", floatfmt=".4g")
    import matplotlib.pyplot as plt

    med = df.groupby("N").median(numeric_only=True).reset_index()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for col, label in (("aggregation", "MMP: GMM aggregation (once per slide)"), ("fusion", "MMP: fusion"),
                       ("full_token", "full-token Transformer")):
        axes[0].loglog(med.N, med[f"{col}_MB"], "o-", label=label)
        axes[1].loglog(med.N, med[f"{col}_s"], "o-", label=label)
    axes[1].loglog(med.N, med.mmp_s, "s--", label="MMP end to end (aggregation + fusion)")
    n = med.N.to_numpy(float)
    axes[0].loglog(n, med.full_token_MB.iloc[-1] * (n / n[-1]) ** 2, "k:", label="∝ N²")
    axes[0].set(xlabel="patches N", ylabel="peak activation memory (MB)", title="Memory of one forward pass")
    axes[1].set(xlabel="patches N", ylabel=f"time (s, median over {cfg.cost.seeds} seeds of best of repeats)",
                title="Time of one forward pass")
    axes[0].legend(fontsize=8)
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    run.save_figure(fig, "cost")
    speed = ot_speedup(run)
    # end to end at the claims' N (cost_shapes.at_n, or the largest N here): full-token time over MMP's
    # (aggregation + fusion), one ratio per seed
    at = cfg.cost_shapes.at_n if cfg.cost_shapes.at_n in set(df.N) else int(df.N.max())
    point = df[df.N == at].sort_values("seed")
    ratio = seed_sample((point.full_token_s / point.mmp_s).to_numpy())
    return {"n_patches": [int(v) for v in cfg.cost.n_patches], "slope_range": [float(lo), float(hi)],
            "end_to_end_time_ratio": ratio, "end_to_end_at_n": int(at),
            **slopes, "upper_range": [float(v) for v in cfg.cost.upper_range], "upper": upper,
            "aggregation_fixed_s": fixed, "ot_speed": speed}


def fit_slopes(df, lo: float, hi: float) -> dict:
    """Log-log slopes over N in [lo, hi]: of time, one per seed (a seed sample); of memory
    (shapes only), one number from seed 0."""
    fit = df[(df.N >= lo) & (df.N <= hi)]
    slopes = {f"{col}_time_slope": seed_sample([loglog_slope(g.N, g[f"{col}_s"]) for _, g in fit.groupby("seed")])
              for col in ("aggregation", "fusion", "mmp", "full_token")}
    mem = fit[fit.seed == 0]
    for col in ("aggregation", "fusion", "full_token"):
        slopes[f"{col}_memory_slope"] = loglog_slope(mem.N, mem[f"{col}_MB"])
    return slopes


def seed_sample(values) -> dict:
    """One value per cost seed (each seed draws its own bags and prototypes)."""
    from shared.samples import sample

    return sample(values, "seed")
