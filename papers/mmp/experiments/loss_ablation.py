"""`loss_ablation`: tables/loss_ablation, MMP-Trans with Cox at batch 64 against NLL at batch 1."""
from __future__ import annotations

import pandas as pd

from ..curves import Curves
from ..metrics import cindex, fold_sample
from .arms import cohort_folds, fit_predict, fmt, load_cohort, paired_gap, prepare_fold, standardize_pi


def loss_ablation(run) -> dict:
    """MMP-Trans with the Cox loss at batch 64 against the NLL loss at batch 1."""
    cfg, seed = run.cfg, run.seed
    cohort = load_cohort(cfg, seed)
    folds = cohort_folds(cohort, cfg)[:cfg.ablation.folds]
    res = {"cox_batch": [], "nll_batch1": []}
    curves = Curves()
    for fold, (tr, te) in enumerate(folds):
        fd = prepare_fold(cohort, tr, cfg, seed, fold, standardize_pi=standardize_pi("mmp_trans", cfg))
        _, risk = fit_predict("mmp_trans", cfg, cohort, fd, tr, te, seed, fold, loss="cox", curves=curves,
                              name=f"cox, batch {cfg.train.batch_size}")
        res["cox_batch"].append(cindex(cohort.time[te], cohort.event[te], risk))
        _, risk = fit_predict("mmp_trans", cfg, cohort, fd, tr, te, seed, fold, loss="nll",
                              batch_size=cfg.ablation.nll_batch_size, curves=curves,
                              name=f"nll, batch {cfg.ablation.nll_batch_size}")
        res["nll_batch1"].append(cindex(cohort.time[te], cohort.event[te], risk))
    curves.save(run)
    metrics = {k: fold_sample(v) for k, v in res.items()}   # the same folds for both losses: paired
    metrics["cox_minus_nll"] = paired_gap(metrics["cox_batch"], metrics["nll_batch1"])
    run.save_table(pd.DataFrame([
        {"loss": f"Cox, batch {cfg.train.batch_size}", "c-index": fmt(metrics["cox_batch"]), "folds": len(folds)},
        {"loss": f"NLL ({cfg.train.n_bins} bins, α={cfg.train.alpha}), batch {cfg.ablation.nll_batch_size}",
         "c-index": fmt(metrics["nll_batch1"]), "folds": len(folds)},
        {"loss": "paired gap (Cox − NLL)", "c-index": fmt(metrics["cox_minus_nll"]), "folds": len(folds)}]),
        "loss_ablation")
    return metrics
