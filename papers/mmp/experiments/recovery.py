"""`recovery`: figures/recovery and tables/recovery (π against the true proportions); and the
notebook's `prototype_view`."""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from shared.seeding import derive_seed

from ..data import make_cohort, site_folds
from ..metrics import fold_sample
from ..panther import aggregate_bags, aggregation_device, fit_prototypes, gmm_aggregate


def prototype_to_cluster(prototypes: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """The true morphology nearest to each prototype."""
    return np.argmin(((prototypes[:, None, :] - centres[None]) ** 2).sum(-1), axis=1)


def recovered_proportions(pi: np.ndarray, prototypes: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """π summed over the prototypes mapped to each true morphology: [P, K]."""
    owner = prototype_to_cluster(prototypes, centres)
    out = np.zeros((pi.shape[0], len(centres)))
    for c, k in enumerate(owner):
        out[:, k] += pi[:, c]
    return out


def prototype_recovery(run) -> dict:
    """Correlation of the GMM mixture weights π (summed per true morphology) with the generator's
    true proportions, on every test fold."""
    cfg, seed = run.cfg, run.seed
    cohort = make_cohort(cfg.data, seed)
    folds = site_folds(cohort.site, cfg.eval.n_folds)
    corr, est_all, true_all = [], [], []
    for fold, (tr, te) in enumerate(folds):
        protos = fit_prototypes([cohort.bags[i] for i in tr], cfg.prototypes.n, per_bag=cfg.prototypes.per_bag,
                                seed=derive_seed(seed, "kmeans", fold), max_iter=cfg.prototypes.max_iter,
                                n_init=cfg.prototypes.n_init)
        hist = aggregate_bags([cohort.bags[i] for i in te], protos, tau=cfg.panther.tau, eps=cfg.panther.eps,
                              n_iter=cfg.panther.n_iter, device=aggregation_device(cfg.device))
        est = recovered_proportions(hist[:, :, 0], protos, cohort.centres)
        corr.append(float(np.corrcoef(est.ravel(), cohort.proportions[te].ravel())[0, 1]))
        est_all.append(est)
        true_all.append(cohort.proportions[te])
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.scatter(np.concatenate(true_all).ravel(), np.concatenate(est_all).ravel(), s=3, alpha=0.4)
    ax.plot([0, 1], [0, 1], "k:")
    ax.set(xlabel="true morphology proportion", ylabel="π summed per morphology (test folds)",
           title=f"Prototype recovery, r = {np.mean(corr):.3f}")
    run.save_figure(fig, "recovery")
    run.save_table(pd.DataFrame({"fold": range(len(corr)), "pearson_r": corr}), "recovery")
    # one r per test fold (prototypes refitted on each training fold, r over that fold's held-out
    # patients) of one synthetic cohort: the sample spans folds, not cohorts
    return {"correlation": fold_sample(corr)}


def prototype_view(cohort, n_prototypes: int, tau: float, patient: int, *, eps: float = 0.1, n_fit: int = 40,
                   per_bag: int = 100, seed: int = 0):
    """Fit `n_prototypes` K-means prototypes on the first `n_fit` bags, run one PANTHER EM step on
    one patient with `tau`, and plot its mixture weights π (summed per true morphology) against the
    true proportions. Returns the figure."""
    import matplotlib.pyplot as plt

    protos = fit_prototypes(cohort.bags[:n_fit], n_prototypes, per_bag=per_bag, seed=seed, n_init=1)
    pi, mu, var = gmm_aggregate(torch.from_numpy(cohort.bags[patient]), protos, tau=tau, eps=eps)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    axes[0].bar(range(n_prototypes), pi.numpy())
    axes[0].set(xlabel="prototype c", ylabel="π_c", title=f"patient {patient}: {len(cohort.bags[patient])} patches")
    if cohort.centres is not None:
        est = recovered_proportions(pi.numpy()[None], protos, cohort.centres)[0]
        k = np.arange(len(est))
        axes[1].bar(k - 0.2, cohort.proportions[patient], width=0.4, label="true")
        axes[1].bar(k + 0.2, est, width=0.4, label="π summed per morphology")
        axes[1].set(xlabel="morphology k", title=f"τ = {tau:g}")
        axes[1].legend()
    fig.tight_layout()
    return fig
