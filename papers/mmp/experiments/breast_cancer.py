"""`breast_cancer`: tables/breast_cancer, the pathway-token model against Cox-PH on real genes."""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from shared.seeding import derive_seed

from ..batches import make_batch
from ..curves import Curves
from ..data import breast_cancer, gene_groups, stratified_folds
from ..metrics import cindex, fold_sample
from ..models import PathwayOnly
from ..train import predict_risk, train_survival
from .arms import fmt, paired_gap


def breast_cancer_check(run) -> dict:
    """scikit-survival's breast-cancer genes (gene clusters, fitted on each training fold, as
    pathways): the pathway-token model against a penalised Cox-PH (lifelines) on the same
    stratified folds."""
    from lifelines import CoxPHFitter
    from sklearn.preprocessing import StandardScaler

    from shared.training import trainer_options

    cfg, seed, bc = run.cfg, run.seed, run.cfg.breast_cancer
    genes, time, event, names = breast_cancer()
    res = {"pathway_tokens": [], "coxph": []}
    curves = Curves()
    for fold, (tr, te) in enumerate(stratified_folds(event, bc.n_folds, seed)):
        scaler = StandardScaler().fit(genes[tr])
        z = scaler.transform(genes).astype(np.float32)
        groups = gene_groups(genes[tr], bc.n_groups, derive_seed(seed, "gene_groups", fold))   # training fold only
        torch.manual_seed(derive_seed(seed, "init", fold))
        model = PathwayOnly(groups, dim=cfg.model.dim, snn_dropout=cfg.model.snn_dropout, n_out=1)
        data = {"genes": torch.from_numpy(z)}
        state = train_survival(model, make_batch(data, tr), time[tr], event[tr], loss="cox", epochs=bc.epochs,
                               batch_size=bc.batch_size, lr=cfg.train.lr, weight_decay=cfg.train.weight_decay,
                               seed=derive_seed(seed, "train", fold), options=trainer_options(cfg))
        curves.add(f"pathway_tokens/fold{fold}", state)
        res["pathway_tokens"].append(cindex(time[te], event[te], predict_risk(model, data, te, state)))
        df = pd.DataFrame(z[tr], columns=names).assign(T=time[tr], E=event[tr].astype(int))
        cph = CoxPHFitter(penalizer=bc.penalizer).fit(df, duration_col="T", event_col="E")
        risk = cph.predict_partial_hazard(pd.DataFrame(z[te], columns=names)).to_numpy()
        res["coxph"].append(cindex(time[te], event[te], risk))
    curves.save(run)
    metrics = {k: fold_sample(v) for k, v in res.items()}   # both models on the same folds: paired
    metrics["pathway_minus_coxph"] = paired_gap(metrics["pathway_tokens"], metrics["coxph"])
    n = metrics["coxph"]["n"]
    run.save_table(pd.DataFrame([
        {"model": f"Pathway tokens ({bc.n_groups} gene clusters, SNN per cluster)",
         "c-index": fmt(metrics["pathway_tokens"]), "folds": n},
        {"model": f"Cox-PH, lifelines (penalizer {bc.penalizer})", "c-index": fmt(metrics["coxph"]), "folds": n},
        {"model": "paired gap (pathway tokens − Cox-PH)", "c-index": fmt(metrics["pathway_minus_coxph"]), "folds": n}]),
        "breast_cancer")
    return metrics
