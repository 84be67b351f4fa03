"""The MMP experiments: c-index table (with oracle ceilings), cost vs N (log-log slopes, the OT
solver's speed-up), compression, loss ablation, prototype recovery, and the real-data (breast cancer)
check. Each is `fn(run) -> metrics`."""
from __future__ import annotations

import time as clock

import numpy as np
import pandas as pd
import torch

from shared.samples import gap, sample
from shared.seeding import derive_seed

from .bags import as_tensors, feature_dim, keep_rows, patch_counts
from .curves import Curves
from .cost_shapes import cost_at_paper_dims
from .replication import replication
from .data import breast_cancer, gene_groups, make_cohort, site_folds, stratified_folds
from .measure import PeakMemory, loglog_slope, measure  # noqa: F401  (PeakMemory: the tests' entry point)
from .metrics import cindex, fold_sample, risk_groups
from .models import ABMIL, MMP, FullTokenTransformer, PathwayOnly, TokenMLP
from .panther import aggregate_bags, aggregation_device, fit_prototypes, gmm_aggregate, tokens
from .train import make_batch, predict_risk, train_survival

ARM_NAMES = {"abmil": "ABMIL", "pathway": "Pathway-only", "mmp_histo": "MMP histology only (official `histo`)",
             "mmp_gene": "MMP pathways only (official `gene`)", "mmp_trans": "MMP-Trans",
             "mmp_trans_std_pi": "MMP-Trans", "mmp_ot": "MMP-OT",
             "full_transformer": "Full-token Transformer", "prototype_cox": "Cox-PH on π only (diagnostic)",
             "token_linear": "Linear Cox on the tokens (histology tokens + genes)",
             "token_mlp": "MLP on the tokens (histology tokens + genes, one hidden layer)"}
MMP_ARMS = {"mmp_histo": ("trans", "histo"), "mmp_gene": ("trans", "gene"), "mmp_trans": ("trans", "both"),
            "mmp_trans_std_pi": ("trans", "both"), "mmp_ot": ("ot", "both")}   # arm -> (fusion, modality)
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


# ----------------------------------------------------------------------------- shared pieces
def load_cohort(cfg, seed: int):
    """The cohort of `data.source`: the seeded synthetic one, or TCGA from the official files (`full`)."""
    if cfg.data.source == "synthetic":
        return make_cohort(cfg.data, seed)
    if cfg.data.source == "tcga":
        from .loaders import load_tcga_cohort

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
    Bags are read one at a time here; lazily read bags (`bags.SlideBags`) stay lazy in the result and
    are read when a batch needs them."""
    from sklearn.preprocessing import StandardScaler

    protos = fit_prototypes((cohort.bags[i] for i in train_idx), cfg.prototypes.n, per_bag=cfg.prototypes.per_bag,
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


# ----------------------------------------------------------------------------- 1. c-index (one experiment per arm, then the table)
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
                                          out_dir=run.checkpoint_dir(f"fold{fold}") if arm == MAIN_ARM else None)
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


CEILINGS = {"proportions": "Ceiling: linear Cox on the true proportions p",
            "grade": "Ceiling: linear Cox on the true grade shifts g",
            "genes": "Ceiling: linear Cox on the true pathway activities a",
            "all": "Ceiling: linear Cox on p, g, a and the cross term"}


def ceiling_scores(cohort, folds, penalizer: float) -> dict:
    """Per-fold test c-index of a penalised linear Cox-PH (lifelines) fitted on each training fold
    on the generator's true proportions p, true grade shifts g, true pathway activities a (what the
    genes measure), and all of them with the cross term z(p)_k* a_c*: {block: [c-index per fold]}."""
    from lifelines import CoxPHFitter

    k_star, c_star = cohort.cross_pair
    z_p = (cohort.proportions - cohort.proportions.mean(0)) / cohort.proportions.std(0)
    blocks = {"proportions": z_p[:, :-1],          # p sums to 1: drop one column
              "grade": cohort.grade, "genes": cohort.activity}
    blocks["all"] = np.column_stack([blocks["proportions"], cohort.grade, cohort.activity,
                                     z_p[:, k_star] * cohort.activity[:, c_star]])
    scores = {key: [] for key in blocks}
    for tr, te in folds:
        for key, x in blocks.items():
            df = pd.DataFrame(x).add_prefix("x")
            train = df.iloc[tr].assign(T=cohort.time[tr], E=cohort.event[tr].astype(int))
            cph = CoxPHFitter(penalizer=penalizer).fit(train, duration_col="T", event_col="E")
            scores[key].append(cindex(cohort.time[te], cohort.event[te], cph.predict_log_partial_hazard(df.iloc[te])))
    return scores


def oracle_ceilings(run) -> dict:
    """How much each modality's true signal is worth (`ceiling_scores`), on the test folds that
    every arm uses. These are properties of the cohort, not of any model."""
    cfg, seed = run.cfg, run.seed
    if cfg.data.source != "synthetic":   # real cohorts (full): no true proportions, grades or pathway signals
        return {"skipped": True, "reason": "the ceilings need the synthetic cohort's true signals"}
    cohort = make_cohort(cfg.data, seed)
    folds = site_folds(cohort.site, cfg.eval.n_folds)
    scores = ceiling_scores(cohort, folds, cfg.eval.prototype_cox_penalizer)
    return {"ceilings": {key: fold_sample(v) for key, v in scores.items()}, "n_folds": len(folds),
            "test_sites": [np.unique(cohort.site[te]).tolist() for _, te in folds]}


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


def check_same_folds(parts: dict) -> None:
    """Every arm must have run the first n_folds of one fold order (same test sites), so that fold
    i of one arm's sample pairs with fold i of another's."""
    longest = max(parts.values(), key=lambda p: p["n_folds"])["test_sites"]
    for arm, part in parts.items():
        if part["test_sites"] != longest[:part["n_folds"]]:
            raise ValueError(f"cindex_{arm}.json tested on sites {part['test_sites']}, not the first "
                             f"{part['n_folds']} folds {longest[:part['n_folds']]} of the other arms: rerun "
                             f"the mmp_cindex_* rules with one config and seed")


def cindex_table(run) -> dict:
    """The c-index table (mean ± std over folds, n folds, 90% interval of the mean) of every arm,
    with the mean-predictor floor, the oracle ceilings and the true log-hazard beside them; reads
    metrics/cindex_<arm>.json and metrics/oracle_ceilings.json, written by their own rules. Each
    c-index is a fold sample; all arms share the fold order, so samples pair fold by fold."""
    from shared.intervals import mean_interval
    from shared.io import read_json

    cfg = run.cfg
    parts = {arm: read_json(run.out / "metrics" / f"cindex_{arm}.json") for arm in cfg.eval.arms}
    check_same_folds(parts)
    full = max(parts.values(), key=lambda p: p["n_folds"])
    ceilings_path = run.out / "metrics" / "oracle_ceilings.json"
    ceilings = read_json(ceilings_path) if ceilings_path.is_file() else {}
    if ceilings.get("skipped"):   # full profile: no synthetic truth, no ceiling rows
        ceilings = {}
    if ceilings:
        check_same_folds({**parts, "oracle_ceilings": ceilings})

    def row(name, s, folds):
        lo, hi = mean_interval(s["values"])[:2] if s["n"] >= 2 else (float("nan"), float("nan"))
        return {"model": name, "c-index": fmt(s), "90% interval of the mean": f"[{lo:.3f}, {hi:.3f}]",
                "mean": s["mean"], "std": s["std"], "folds": folds}

    metrics, rows = {}, []
    metrics["mean_predictor"] = full["mean_predictor"]
    rows.append(row("Mean predictor (floor: one constant risk)", full["mean_predictor"], full["n_folds"]))
    for arm, part in parts.items():
        metrics[arm] = part["cindex"]
        rows.append(row(arm_label(arm, cfg), part["cindex"], part["n_folds"]))
    for key, label in CEILINGS.items():
        if key in ceilings.get("ceilings", {}):
            metrics[f"ceiling_{key}"] = ceilings["ceilings"][key]
            rows.append(row(label, ceilings["ceilings"][key], ceilings["n_folds"]))
    if "oracle" in full:
        metrics["oracle"] = full["oracle"]
        rows.append(row("Oracle (true log-hazard)", full["oracle"], full["n_folds"]))
    n = len(metrics.get("mmp_trans", {}).get("values", []))
    for arm in ("abmil", "pathway", "mmp_histo", "mmp_gene", "mmp_ot", "mmp_trans_std_pi", "full_transformer",
                "token_linear", "token_mlp"):
        if arm in parts and "mmp_trans" in parts and parts[arm]["n_folds"] == n:   # paired per-fold gaps
            metrics[f"trans_minus_{arm}"] = paired_gap(metrics["mmp_trans"], metrics[arm])
    run.save_table(pd.DataFrame(rows), "cindex")
    spread = [{"arm": arm_label(arm, cfg), "π std (input)": part["token_spread"]["pi_input_std"],
               "π part, projected": part["token_spread"]["pi_projected"],
               "μ, Σ part, projected": part["token_spread"]["mu_sigma_projected"],
               "ratio μΣ / π": part["token_spread"]["ratio"]} for arm, part in parts.items() if "token_spread" in part]
    run.save_table(pd.DataFrame(spread, columns=["arm", "π std (input)", "π part, projected", "μ, Σ part, projected",
                                                 "ratio μΣ / π"]), "token_spread", floatfmt=".4g")
    return metrics


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


# ----------------------------------------------------------------------------- 1b. why MMP-Trans stays near chance
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

    from . import factorial

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


# ----------------------------------------------------------------------------- 2. cost vs N
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


def ot_speedup(run) -> dict:
    """Training-step time of MMP-OT (forward + backward of the Cox loss on `cost.ot_batch`
    patients at this profile's token sizes) with the batched Sinkhorn against POT's per-patient
    loop; same model, inputs and plans. Best of `cost.ot_steps` steps each."""
    from .losses import cox_loss

    cfg, seed = run.cfg, run.seed
    rng = np.random.default_rng(derive_seed(seed, "ot_speed"))
    d, n_p, b = cfg.data.dim, cfg.data.n_pathways, cfg.cost.ot_batch
    pathways = [np.arange(i, i + cfg.data.genes_min) % cfg.data.n_genes for i in range(n_p)]
    cohort_like = type("C", (), {"bags": [np.zeros((1, d), np.float32)], "pathways": pathways})
    bags = [rng.normal(size=(500, d)).astype(np.float32) for _ in range(b)]
    protos = rng.normal(size=(cfg.prototypes.n, d)).astype(np.float32)
    hist = torch.from_numpy(aggregate_bags(bags, protos, tau=cfg.panther.tau, eps=cfg.panther.eps,
                                           n_iter=cfg.panther.n_iter))
    batch = {"hist": hist, "genes": torch.from_numpy(rng.normal(size=(b, cfg.data.n_genes)).astype(np.float32))}
    time_, event = torch.from_numpy(rng.exponential(size=b)), torch.from_numpy(rng.uniform(size=b) < 0.4)
    times, plans = {}, {}
    for solver in ("batched", "pot"):
        model = build_model("mmp_ot", cfg, cohort_like, 1, seed)
        model.ot_solver = solver
        model.eval()                        # no dropout: both solvers see the same tokens
        best = np.inf
        for _ in range(cfg.cost.ot_steps):
            model.zero_grad()
            t0 = clock.perf_counter()
            out, plan = model(batch, return_map=True)
            cox_loss(out[:, 0], time_, event).backward()
            best = min(best, clock.perf_counter() - t0)
        times[solver], plans[solver] = best, plan.detach()
    diff = float((plans["batched"] - plans["pot"]).abs().max() / plans["pot"].abs().max())
    run.save_table(pd.DataFrame([{"solver": "POT, one patient at a time (official)", "step_s": times["pot"]},
                                 {"solver": "kernels.sinkhorn_unbalanced, whole batch", "step_s": times["batched"]},
                                 {"solver": f"speed-up (batch of {b}; plans agree to {diff:.1e} relative)",
                                  "step_s": times["pot"] / times["batched"]}]), "ot_speed", floatfmt=".4g")
    return {"pot_step_s": times["pot"], "batched_step_s": times["batched"],
            "speedup": times["pot"] / times["batched"], "plan_max_rel_diff": diff, "batch": b}


# ----------------------------------------------------------------------------- 3. compression
def compression(run) -> dict:
    """Numbers per patient: the patch bag N×d against C tokens of (2d+1)."""
    cfg = run.cfg
    rows = []
    if cfg.data.source == "synthetic":
        cohort = make_cohort(cfg.data, run.seed)
        n_mean = float(np.mean([len(b) for b in cohort.bags]))
        rows.append({"setting": "this profile (mean bag)", "N": n_mean, "d": cfg.data.dim, "C": cfg.prototypes.n})
    p = cfg.paper_dims
    rows.append({"setting": "paper (UNI)", "N": p.n_patches, "d": p.dim, "C": p.n_prototypes})
    for r in rows:
        r["patch_numbers"] = r["N"] * r["d"]
        r["token_numbers"] = r["C"] * (2 * r["d"] + 1)
        r["ratio"] = r["patch_numbers"] / r["token_numbers"]
    run.save_table(pd.DataFrame(rows), "compression", floatfmt=".1f")
    out = {"paper_dims": {k: float(v) for k, v in rows[-1].items() if k != "setting"}, "from_config": ["paper_dims"]}
    if len(rows) == 2:
        out["profile_dims"] = {k: float(v) for k, v in rows[0].items() if k != "setting"}
    return out


# ----------------------------------------------------------------------------- 4. loss ablation
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


# ----------------------------------------------------------------------------- 6. prototype recovery
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


# ----------------------------------------------------------------------------- real data
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


EXPERIMENTS = {**{f"cindex_{arm}": cindex_arm(arm) for arm in ARM_NAMES}, "oracle_ceilings": oracle_ceilings,
               "cindex": cindex_table, "trans_diagnostics": trans_diagnostics, "cost": cost_vs_patches,
               "cost_shapes": cost_at_paper_dims, "replication": replication, "compression": compression,
               "loss_ablation": loss_ablation, "recovery": prototype_recovery, "breast_cancer": breast_cancer_check}


# ----------------------------------------------------------------------------- notebook exploration
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
