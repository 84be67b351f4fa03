"""`trans_diagnostics`: tables/trans_diagnostics and tables/trans_factorial, the 2^k factorial of
MMP-Trans and the one-change variants."""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from shared.samples import gap, sample
from shared.seeding import derive_seed

from .. import factorial
from ..batches import make_batch
from ..curves import Curves
from ..metrics import cindex
from ..train import predict_risk, train_survival
from .arms import DEFAULT_CELL, build_model, cohort_folds, fmt, load_cohort, prepare_fold, with_standardized_pi

FACTORS = {   # the factorial's switches of MMP-Trans (diagnostics.factors), each off in the official default
    "std_pi": "π standardised (tokens.standardize_pi=true)",
    "value_residual": "value residual (model.value_residual=true)",
    "epochs": "{factor}× epochs",
}
VARIANTS = {  # one change at a time from the default, beside the factorial (diagnostics.variants)
    "genes_zeroed": "MMP-Trans, genes zeroed (pathway tokens identical for every patient)",
    "few_pathways": "MMP-Trans, only the first {few} pathway tokens",
    "histo": "MMP `histo` arm (no pathway tokens), official epochs",
    "histo_epochs": "MMP `histo` arm, {factor}× epochs (same budget as the row above)",
}


def diagnostic_label(name: str, dg) -> str:
    """The table label of a factorial cell (`factorial.cell_name`) or a one-change variant."""
    if name in VARIANTS:
        return VARIANTS[name].format(few=dg.few_pathways, factor=dg.epochs_factor)
    if name == DEFAULT_CELL:
        return "MMP-Trans, official (raw π, no residual, 1× epochs)"
    return "MMP-Trans, " + " + ".join(FACTORS[f].format(factor=dg.epochs_factor) for f in name.split("+"))


class _Pathways:
    """The part of a cohort that `build_model` reads: the bags' width and the pathways."""

    def __init__(self, bags, pathways):
        self.bags, self.pathways = bags, pathways


@torch.no_grad()
def fusion_usage(model, batch) -> dict:
    """Where the trained fused model looks: the attention mass that histology rows and pathway rows
    put on histology columns (uniform attention gives C/(P+C)), and the share of the head's output
    spread across patients that comes from the histology mean: std(w_H·h̄_H) / (std(w_P·h̄_P) + std(w_H·h̄_H))."""
    seen = {}
    hook = model.head.register_forward_hook(lambda m, inp, out: seen.update(x=inp[0]))
    _, attn = model(batch, return_map=True)
    hook.remove()
    p, a = model.n_p, model.attn_dim
    w = model.head.weight[0]
    gene, hist = seen["x"][:, :a] @ w[:a], seen["x"][:, a:] @ w[a:]
    return {"hist_rows_on_hist": float(attn[:, p:, p:].sum(-1).mean()),
            "path_rows_on_hist": float(attn[:, :p, p:].sum(-1).mean()),
            "uniform_on_hist": model.n_h / (p + model.n_h),
            "head_share_hist": float(hist.std() / (gene.std() + hist.std()))}


def trans_diagnostics(run) -> dict:
    """Why MMP-Trans stays near chance while its own `histo` arm learns. A 2^k factorial of MMP-Trans
    over `diagnostics.factors` (π standardised, value residual, a longer schedule), every cell trained
    on the same folds, seeds and tokens, so that main effects and interactions pair by fold
    (`factorial.effects`); beside it, the one-change variants `diagnostics.variants` (genes zeroed,
    fewer pathway tokens, the `histo` arm at both budgets). For every fused model: the attention mass
    on histology tokens and the head's histology share. Diagnostics only: the official defaults stay."""
    from shared.training import trainer_options

    cfg, seed = run.cfg, run.seed
    dg, t = cfg.diagnostics, cfg.train
    cohort = load_cohort(cfg, seed)
    folds = cohort_folds(cohort, cfg)
    factors = list(dg.factors)
    unknown = [f for f in factors if f not in FACTORS] + [v for v in dg.variants if v not in VARIANTS]
    if unknown:
        raise ValueError(f"diagnostics: unknown {unknown}; factors: {sorted(FACTORS)}, variants: {sorted(VARIANTS)}")
    design = factorial.cells(factors)
    runs = [(name, on) for name, on in design] + [(v, frozenset()) for v in dg.variants]
    scores = {name: [] for name, _ in runs}
    usage = {name: [] for name, _ in runs if not name.startswith("histo")}
    curves = Curves()
    for fold, (tr, te) in enumerate(folds):
        raw = prepare_fold(cohort, tr, cfg, seed, fold, standardize_pi=False)
        std = with_standardized_pi(raw, tr) if any("std_pi" in on for _, on in runs) else None
        for name, on in runs:
            data, pathways, epochs = dict((std if "std_pi" in on else raw)["data"]), cohort.pathways, t.epochs
            if name == "genes_zeroed":
                data["genes"] = torch.zeros_like(data["genes"])
            if name == "few_pathways":
                pathways = cohort.pathways[:dg.few_pathways]
                data["genes"] = data["genes"][:, :max(int(g.max()) for g in pathways) + 1]
            if "epochs" in on or name == "histo_epochs":
                epochs = t.epochs * dg.epochs_factor
            model = build_model("mmp_histo" if name.startswith("histo") else "mmp_trans", cfg,
                                _Pathways(cohort.bags, pathways), 1, derive_seed(seed, "init", fold))
            model.value_residual = "value_residual" in on or bool(cfg.model.value_residual)
            state = train_survival(model, make_batch(data, tr), cohort.time[tr], cohort.event[tr], loss="cox",
                                   epochs=epochs, batch_size=t.batch_size, lr=t.lr, weight_decay=t.weight_decay,
                                   seed=derive_seed(seed, "train", fold), options=trainer_options(cfg))
            curves.add(f"{name}/fold{fold}", state)
            scores[name].append(cindex(cohort.time[te], cohort.event[te], predict_risk(model, data, te, state)))
            if name in usage:
                usage[name].append(fusion_usage(model, make_batch(data, te)))
    curves.save(run)
    # test/train size of the folds, for the corrected interval over folds that share training data
    ratio = float(np.mean([len(te) / len(tr) for tr, te in folds]))
    samples = {name: sample(v, "fold", test_train_ratio=ratio) for name, v in scores.items()}
    metrics = {"factors": factors, "cells": [name for name, _ in design], "variants": list(dg.variants),
               "cindex": samples, "gap": {},
               "usage": {v: {k: float(np.mean([u[k] for u in us])) for k in us[0]} for v, us in usage.items()}}
    if factors:
        metrics["effects"] = {name.replace(" x ", "_x_"): eff for name, eff in
                              factorial.effects(scores, factors, ratio).items()}
    rows = []
    for name, _ in runs:
        s = samples[name]
        ref = "histo" if name == "histo_epochs" else DEFAULT_CELL
        g = gap(s, samples[ref]) if name != ref and ref in samples else None
        if g is not None:
            metrics["gap"][name] = {"ref": ref, **g}
        lo, hi = factorial.interval(s)
        u = metrics["usage"].get(name, {})
        g_txt = "" if g is None else ("{:+.3f} [{:+.3f}, {:+.3f}]".format(g["mean"], *factorial.interval(g))
                                      + f" vs {ref}, {sum(v > 0 for v in g['values'])}/{g['n']} folds > 0")
        rows.append({"model": diagnostic_label(name, dg), "c-index": fmt(s), "90% interval": f"[{lo:.3f}, {hi:.3f}]",
                     "paired gap [90%]": g_txt,
                     "H rows on H": u.get("hist_rows_on_hist", np.nan), "P rows on H": u.get("path_rows_on_hist", np.nan),
                     "uniform on H": u.get("uniform_on_hist", np.nan), "head share H": u.get("head_share_hist", np.nan)})
    run.save_table(pd.DataFrame(rows), "trans_diagnostics", floatfmt=".3f")
    eff_rows = []
    for key, eff in metrics.get("effects", {}).items():
        lo, hi = factorial.interval(eff)
        names = [FACTORS[f].format(factor=dg.epochs_factor).split(" (")[0] for f in key.split("_x_")]
        eff_rows.append({"effect": ("main: " if len(names) == 1 else "interaction: ") + " × ".join(names),
                         "mean": eff["mean"], "90% interval (corrected, folds)": f"[{lo:+.3f}, {hi:+.3f}]",
                         "folds > 0": f"{sum(v > 0 for v in eff['values'])}/{eff['n']}",
                         "per fold": " ".join(f"{v:+.3f}" for v in eff["values"])})
    run.save_table(pd.DataFrame(eff_rows, columns=["effect", "mean", "90% interval (corrected, folds)", "folds > 0",
                                                   "per fold"]), "trans_factorial", floatfmt="+.3f")
    return metrics
