"""`cindex_<arm>`: one arm trained and scored on the folds (metrics/cindex_<arm>.json, its loss
curves); the main training, `cindex_mmp_trans`, also makes figures/interpretability."""
from __future__ import annotations

import numpy as np
import torch

from ..batches import make_batch
from ..curves import Curves
from ..metrics import cindex, fold_sample, risk_groups
from .arms import MAIN_ARM, MMP_ARMS, TRAINED_ARMS, cohort_folds, fit_predict, fit_predict_prototype_cox, load_cohort, \
    prepare_fold, standardize_pi


def checkpointed(arm: str, cfg) -> bool:
    """Whether `arm`'s fits keep `last.ckpt` (every trainer.every_n_train_steps steps and at epoch ends)
    and resume from it after a kill: the main training always; the arms of `eval.checkpoint_arms` too
    (every trained arm at full, where each is hours; none more at smoke and tiny, where each is seconds)."""
    unknown = [a for a in cfg.eval.checkpoint_arms if a not in TRAINED_ARMS]
    if unknown:
        raise ValueError(f"eval.checkpoint_arms: {unknown} are not trained arms; valid: {sorted(TRAINED_ARMS)}")
    return arm == MAIN_ARM or arm in cfg.eval.checkpoint_arms


def cindex_arm(arm: str):
    """The experiment that trains `arm` on the folds of `eval.folds` (`cohort_folds`) and scores its test folds."""

    def experiment(run) -> dict:
        cfg, seed = run.cfg, run.seed
        cohort = load_cohort(cfg, seed)
        folds = cohort_folds(cohort, cfg)
        n_run = cfg.eval.transformer_folds if arm == "full_transformer" else len(folds)
        scores, oracle, test_sites = [], [], []
        risk_oof = np.full(len(cohort), np.nan)
        pi_oof = np.full((len(cohort), cfg.prototypes.n), np.nan)
        example = {}
        curves = Curves()
        for fold, (tr, te) in enumerate(folds[:n_run]):
            fd = prepare_fold(cohort, tr, cfg, seed, fold, standardize_pi=standardize_pi(arm, cfg))
            if arm == "prototype_cox":
                model, risk = None, fit_predict_prototype_cox(cfg, cohort, fd, tr, te)
            else:
                model, risk = fit_predict(arm, cfg, cohort, fd, tr, te, seed, fold, curves=curves,
                                          out_dir=run.checkpoint_dir(f"fold{fold}") if checkpointed(arm, cfg) else None)
            scores.append(cindex(cohort.time[te], cohort.event[te], risk))
            test_sites.append(np.unique(cohort.site[te]).tolist())
            if cohort.log_hazard is not None:
                oracle.append(cindex(cohort.time[te], cohort.event[te], cohort.log_hazard[te]))
            risk_oof[te] = risk
            pi_oof[te] = fd["pi"][te]
            if fold == 0 and arm in ("mmp_trans", "mmp_ot"):   # the fusion map of one test patient
                with torch.no_grad():
                    _, fmap = model(make_batch(fd["data"], te[:1]), return_map=True)
                example = {"map": fmap[0].numpy(), "patient": int(te[0])}
            if fold == 0 and arm in MMP_ARMS and arm != "mmp_gene":
                spread = token_spread(model, fd["data"]["hist"])
        # one c-index per test fold, in fold order; test_sites lets the table check that fold i is
        # the same fold for every arm, so the arms' samples pair by index
        metrics = {"cindex": fold_sample(scores), "n_folds": len(scores), "test_sites": test_sites,
                   "standardize_pi": standardize_pi(arm, cfg) if arm in MMP_ARMS else None,
                   # a mean (constant-risk) predictor ties every pair: c-index 0.5 on every test fold
                   "mean_predictor": fold_sample([cindex(cohort.time[te], cohort.event[te], np.zeros(len(te)))
                                                  for _, te in folds[:n_run]])}
        if oracle:
            metrics["oracle"] = fold_sample(oracle)
        if arm != "prototype_cox":   # a lifelines fit, no training curve
            curves.save(run)
        if arm in MMP_ARMS and arm != "mmp_gene":
            metrics["token_spread"] = spread
        if arm == "mmp_trans":
            done = ~np.isnan(risk_oof)
            groups = risk_groups(cohort.time[done], cohort.event[done], risk_oof[done])
            from scipy.stats import spearmanr

            rho = np.array([spearmanr(pi_oof[done, c], risk_oof[done]).statistic for c in range(pi_oof.shape[1])])
            metrics["km_logrank_p"] = groups["p_value"]
            metrics["km_events_high_low"] = [int(cohort.event[done][groups["high"]].sum()),
                                             int(cohort.event[done][~groups["high"]].sum())]
            metrics["pi_risk_spearman"] = [float(r) for r in rho]
            run.save_figure(interpretability_figure(cohort.time[done], cohort.event[done], groups, example,
                                                    len(cohort.pathways), pi_oof[done], risk_oof[done], rho),
                            "interpretability")
        return metrics

    experiment.__name__ = f"cindex_{arm}"
    return experiment


@torch.no_grad()
def token_spread(model, hist: torch.Tensor) -> dict:
    """How much the π part and the μ, Σ part of the projected histology tokens vary across patients
    (the trained `hist_proj` of fold 0, over every patient): for each prototype c, the norm of the
    across-patient std of W_π π_c and of W_μΣ [μ_c, Σ_c], averaged over c; also π's own std."""
    w, x = model.hist_proj.weight, hist.to(model.hist_proj.weight.dtype)        # [D, 2d+1], [P, C, 2d+1]
    pi_part = x[..., :1] * w[:, 0]                                              # [P, C, D]
    rest_part = x[..., 1:] @ w[:, 1:].T
    pi_spread = float(pi_part.std(0).norm(dim=-1).mean())
    rest_spread = float(rest_part.std(0).norm(dim=-1).mean())
    return {"pi_input_std": float(x[..., 0].std(0).mean()), "pi_projected": pi_spread,
            "mu_sigma_projected": rest_spread, "ratio": rest_spread / pi_spread}


def interpretability_figure(time, event, groups, example, n_pathways, pi, risk, rho):
    import matplotlib.pyplot as plt
    from lifelines import KaplanMeierFitter

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    ax = axes[0]
    for name, sel, color in (("low risk", ~groups["high"], "C0"), ("high risk", groups["high"], "C3")):
        KaplanMeierFitter(label=f"{name} (n={sel.sum()})").fit(time[sel], event[sel]).plot_survival_function(
            ax=ax, color=color)
    ax.set_title(f"MMP-Trans risk groups (out of fold)\nlog-rank p = {groups['p_value']:.2g}")
    ax.set_xlabel("time")
    if example:
        attn = example["map"][n_pathways:, :n_pathways]          # histology rows, pathway columns
        im = axes[1].imshow(attn, aspect="auto", cmap="viridis")
        fig.colorbar(im, ax=axes[1])
        axes[1].set_title(f"Prototype → pathway attention (test patient {example['patient']})")
        axes[1].set_xlabel("pathway")
        axes[1].set_ylabel("prototype")
    ax = axes[2]
    top = int(np.nanargmax(np.abs(rho)))
    ax.scatter(pi[:, top], risk, s=6, alpha=0.6)
    ax.set_xlabel(f"π of prototype {top} (largest |Spearman ρ| = {abs(rho[top]):.2f})")
    ax.set_ylabel("predicted log-risk (MMP-Trans)")
    ax.set_title("Prototype proportion vs predicted risk")
    fig.tight_layout()
    return fig
