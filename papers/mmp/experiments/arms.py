"""The arms and one fold's fit, shared by every experiment that trains: the cohort and its folds,
a fold's inputs (prototypes, PANTHER tokens, z-scored genes, bags), the model of an arm, and one
arm's fit and test-fold risks."""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from shared.samples import gap
from shared.seeding import derive_seed

from ..bags import as_tensors, feature_dim, heads, keep_rows, patch_counts
from ..batches import make_batch
from ..curves import Curves
from ..data import make_cohort, site_folds
from ..models import ABMIL, MMP, FullTokenTransformer, PathwayOnly, TokenMLP
from ..panther import aggregate_bags, aggregation_device, fit_prototypes
from ..train import predict_risk, train_survival

ARM_NAMES = {"abmil": "ABMIL", "pathway": "Pathway-only", "mmp_histo": "MMP histology only (official `histo`)",
             "mmp_gene": "MMP pathways only (official `gene`)", "mmp_trans": "MMP-Trans",
             "mmp_trans_std_pi": "MMP-Trans", "mmp_ot": "MMP-OT",
             "full_transformer": "Full-token Transformer", "prototype_cox": "Cox-PH on π only (diagnostic)",
             "token_linear": "Linear Cox on the tokens (histology tokens + genes)",
             "token_mlp": "MLP on the tokens (histology tokens + genes, one hidden layer)"}
MMP_ARMS = {"mmp_histo": ("trans", "histo"), "mmp_gene": ("trans", "gene"), "mmp_trans": ("trans", "both"),
            "mmp_trans_std_pi": ("trans", "both"), "mmp_ot": ("ot", "both")}   # arm -> (fusion, modality)
TRAINED_ARMS = [a for a in ARM_NAMES if a != "prototype_cox"]   # prototype_cox is a lifelines fit
MAIN_ARM = "mmp_trans"   # the main training: checkpointed every trainer.every_n_train_steps, resumed after a kill
DEFAULT_CELL = "default"   # the factorial's cell with every factor off: the official MMP-Trans
WEIGHT_SECTIONS = ("data", "prototypes", "panther", "tokens", "model", "ot", "train")   # what decides a fit's weights


def standardize_pi(arm: str, cfg) -> bool:
    """Whether `arm` z-scores π in its tokens: `tokens.standardize_pi` (false: the official raw π),
    except `mmp_trans_std_pi`, the MMP-Trans row that always standardises (the finding's other setting)."""
    return True if arm == "mmp_trans_std_pi" else bool(cfg.tokens.standardize_pi)


def arm_label(arm: str, cfg) -> str:
    if arm in MMP_ARMS and arm != "mmp_gene":
        return f"{ARM_NAMES[arm]}, standardize_pi={str(standardize_pi(arm, cfg)).lower()}"
    return ARM_NAMES[arm]


def load_cohort(cfg, seed: int):
    """The cohort of `data.source`: the seeded synthetic one, or TCGA from the official files (`full`)."""
    if cfg.data.source == "synthetic":
        return make_cohort(cfg.data, seed)
    if cfg.data.source == "tcga":
        from ..loaders import load_tcga_cohort

        return load_tcga_cohort(cfg.full, cfg.eval.n_folds)
    raise ValueError(f"data.source must be 'synthetic' or 'tcga', got {cfg.data.source!r}")


def cohort_folds(cohort, cfg) -> list:
    """The (train, test) index pairs that `eval.folds` names: `site_disjoint` deals the sites to
    `eval.n_folds` folds (the synthetic profiles); `official_splits` takes the official split files'
    folds, read with the cohort (the full profile), so results compare with Table 1 fold by fold."""
    if cfg.eval.folds == "site_disjoint":
        return site_folds(cohort.site, cfg.eval.n_folds)
    if cfg.eval.folds == "official_splits":
        if cohort.folds is None:
            raise ValueError("eval.folds: official_splits reads the official split files: set data.source: tcga "
                             "and full.split_dir (or eval.folds: site_disjoint for the synthetic cohort)")
        return cohort.folds
    raise ValueError(f"eval.folds must be 'site_disjoint' or 'official_splits', got {cfg.eval.folds!r}")


def prepare_fold(cohort, train_idx, cfg, seed: int, fold: int, *, standardize_pi: bool = False) -> dict:
    """Per-fold inputs: prototypes (K-means on training bags), PANTHER tokens of every patient,
    genes z-scored on the training fold, the bags, and the capped bags of the full-token model.
    `standardize_pi` z-scores each π_c with the training fold's mean and std (the official token
    keeps raw π, whose spread across patients is tiny next to μ and Σ); `pi` keeps the raw π.
    Bags are read one at a time here, each in full once (K-means reads only the training bags' first
    patches, `bags.heads`); lazily read bags (`bags.SlideBags`) stay lazy in the result and
    are read when a batch needs them."""
    from sklearn.preprocessing import StandardScaler

    protos = fit_prototypes(heads(cohort.bags, train_idx, cfg.prototypes.per_bag), cfg.prototypes.n,
                            per_bag=cfg.prototypes.per_bag,
                            seed=derive_seed(seed, "kmeans", fold), max_iter=cfg.prototypes.max_iter,
                            n_init=cfg.prototypes.n_init)
    hist = aggregate_bags(cohort.bags, protos, tau=cfg.panther.tau, eps=cfg.panther.eps, n_iter=cfg.panther.n_iter,
                          device=aggregation_device(cfg.device))
    pi = hist[:, :, 0].copy()
    if standardize_pi:
        hist[:, :, 0] = standardized_pi(pi, train_idx)
    scaler = StandardScaler().fit(cohort.genes[train_idx])
    genes = np.nan_to_num(scaler.transform(cohort.genes)).astype(np.float32)
    rng = np.random.default_rng(derive_seed(seed, "patch_cap", fold))
    cap = cfg.eval.patch_cap
    kept = [None if n <= cap else np.sort(rng.choice(n, cap, replace=False)) for n in patch_counts(cohort.bags)]
    return {"prototypes": protos, "pi": pi,
            "data": {"hist": torch.from_numpy(hist), "genes": torch.from_numpy(genes),
                     "bags": as_tensors(cohort.bags)},
            "capped": as_tensors(keep_rows(cohort.bags, kept))}


def standardized_pi(pi: np.ndarray, train_idx) -> np.ndarray:
    """π_c z-scored with the training fold's mean and std of each prototype (a constant π_c stays as is)."""
    mean, std = pi[train_idx].mean(0), pi[train_idx].std(0)
    return (pi - mean) / np.where(std > 0, std, 1.0)


def with_standardized_pi(fold_data: dict, train_idx) -> dict:
    """`prepare_fold(..., standardize_pi=True)` from a fold prepared with raw π, without refitting
    the prototypes or re-aggregating the bags (the same numbers: only the token's π entry changes)."""
    hist = fold_data["data"]["hist"].numpy().copy()
    hist[:, :, 0] = standardized_pi(fold_data["pi"], train_idx)
    return {**fold_data, "data": {**fold_data["data"], "hist": torch.from_numpy(hist)}}


def build_model(arm: str, cfg, cohort, n_out: int, seed: int):
    torch.manual_seed(seed)
    m, d = cfg.model, feature_dim(cohort.bags)
    if arm in MMP_ARMS:
        fusion, modality = MMP_ARMS[arm]
        return MMP(2 * d + 1, cfg.prototypes.n, cohort.pathways, dim=m.dim, code_dim=m.code_dim,
                   snn_dropout=m.snn_dropout, dropout=m.dropout, n_out=n_out, fusion=fusion, modality=modality,
                   double_softmax=m.double_softmax, value_residual=m.value_residual,
                   ot_reg=cfg.ot.reg, ot_reg_m=cfg.ot.reg_m, ot_iter=cfg.ot.num_iter_max, ot_stop=cfg.ot.stop_thr,
                   ot_solver=cfg.ot.solver)
    if arm == "pathway":
        return PathwayOnly(cohort.pathways, dim=m.dim, snn_dropout=m.snn_dropout, n_out=n_out)
    if arm == "abmil":
        return ABMIL(d, dim=m.abmil_dim, dropout=m.dropout, n_out=n_out)
    if arm in ("token_linear", "token_mlp"):
        return TokenMLP(cfg.prototypes.n * (2 * d + 1) + cohort.genes.shape[1], hidden=0 if arm == "token_linear" else m.mlp_dim,
                        dropout=m.dropout, n_out=n_out)
    if arm == "full_transformer":
        return FullTokenTransformer(d, cohort.pathways, dim=m.transformer_dim, snn_dropout=m.snn_dropout,
                                    dropout=m.dropout, n_out=n_out)
    raise ValueError(f"unknown arm {arm!r}; valid: {sorted(ARM_NAMES)}")


def fit_predict(arm, cfg, cohort, fold_data, train_idx, test_idx, seed, fold, *, loss="cox", batch_size=None,
                curves: Curves | None = None, name: str | None = None, out_dir=None):
    """Train one arm on one fold (same init and shuffling seeds for every arm); test-fold risks.
    The fit's loss curve goes to `curves` as `<name or arm>/fold<fold>`; with `out_dir` the fit
    checkpoints there and resumes from it (the main training)."""
    from shared.training import trainer_options

    n_out = 1 if loss == "cox" else cfg.train.n_bins
    model = build_model(arm, cfg, cohort, n_out, derive_seed(seed, "init", fold))
    data = dict(fold_data["data"])
    if arm == "full_transformer":
        data["bags"] = fold_data["capped"]
    t = cfg.train
    weights_from = {**{k: cfg[k] for k in WEIGHT_SECTIONS}, "arm": arm, "fold": fold, "loss": loss,
                    "batch_size": batch_size, "standardize_pi": standardize_pi(arm, cfg)}
    state = train_survival(model, make_batch(data, train_idx), cohort.time[train_idx], cohort.event[train_idx],
                           loss=loss, epochs=t.epochs, batch_size=batch_size or t.batch_size, lr=t.lr,
                           weight_decay=t.weight_decay, seed=derive_seed(seed, "train", fold), n_bins=t.n_bins,
                           alpha=t.alpha, out_dir=out_dir, options=trainer_options(cfg), cache_config=weights_from)
    if curves is not None:
        curves.add(f"{name or arm}/fold{fold}", state)
    return model, predict_risk(model, data, test_idx, state)


def fit_predict_prototype_cox(cfg, cohort, fold_data, train_idx, test_idx):
    """Diagnostic: a penalised linear Cox-PH (lifelines) on the C mixture weights π alone."""
    from lifelines import CoxPHFitter

    pi = pd.DataFrame(fold_data["pi"]).add_prefix("pi_")
    train = pi.iloc[train_idx].assign(T=cohort.time[train_idx], E=cohort.event[train_idx].astype(int))
    cph = CoxPHFitter(penalizer=cfg.eval.prototype_cox_penalizer).fit(train, duration_col="T", event_col="E")
    return cph.predict_partial_hazard(pi.iloc[test_idx]).to_numpy()


def fmt(s: dict) -> str:
    """A fold sample as `mean ± std` (std over folds, ddof 1; a single fold has none)."""
    return f"{s['mean']:.3f} ± {s['std']:.3f}" if s["std"] is not None else f"{s['mean']:.3f} (one fold)"


def paired_gap(a: dict, b: dict) -> dict:
    """The fold-wise difference a_i − b_i of two samples on the same folds."""
    return gap(a, b)


def fold_scores(cohort, cfg, seed: int, arms, n_folds: int | None = None) -> tuple[dict, float]:
    """Every arm of `arms` trained and scored on each site-disjoint fold of `cohort` (`n_folds`, default
    `eval.n_folds`), as `cindex_<arm>` does (prototypes and tokens once per fold, shared by the arms):
    ({arm: [c-index per fold]}, the folds' mean test/train size, for the corrected interval over folds)."""
    from ..metrics import cindex

    folds = site_folds(cohort.site, n_folds or cfg.eval.n_folds)
    scores = {arm: [] for arm in arms}
    for fold, (tr, te) in enumerate(folds):
        fd = prepare_fold(cohort, tr, cfg, seed, fold, standardize_pi=False)
        for arm in arms:
            _, risk = fit_predict(arm, cfg, cohort, fd, tr, te, seed, fold)
            scores[arm].append(cindex(cohort.time[te], cohort.event[te], risk))
    return scores, float(np.mean([len(te) / len(tr) for tr, te in folds]))


def knob_data(cfg, **values):
    """The config's `data` section with the knobs' bag sizes (`knobs.data`) and `values` set."""
    from shared.config import Config

    return Config.wrap({**cfg.data, **cfg.knobs.data, **values})
