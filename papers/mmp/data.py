"""Synthetic multimodal survival cohort, site-disjoint folds, and the breast-cancer set.

Generator (all draws from one seed):
- K morphologies with centres c_k ~ N(0, s² I_d) and noise σ_k; each site has a shift δ_site ~ N(0, s_site² I_d).
- Patient i: bag size N_i ~ logU[n_min, n_max], proportions p_i ~ Dirichlet(α 1_K), patch labels
  ~ Categorical(p_i), x = c_k + g_ik s u_k + δ_site + σ_k ε.
- Grade: a few "graded" morphologies k ∈ G carry a patient-level shift of their mean feature along a
  unit direction u_k inside the cluster, g_ik ~ N(0, 1) scaled by s (`grade_shift`); the other
  morphologies have g_ik = 0. This puts risk in the GMM means μ_c, where real (UNI) morphology lives,
  and not only in the proportions π_c.
- Transcriptomics: P pathways of 10–60 overlapping genes (of G); activity a_ic = w_cᵀ p_i + u_ic;
  gene_g = Σ_{c ∋ g} L_gc a_ic + noise.
- Hazard: log h_i = β_hᵀ z(p_i) + β_sᵀ g_i + β_gᵀ a_i + γ z(p_i)_{k*} a_{i,c*}, with z the
  standardised proportions: morphology mix (π) and grade (μ) from the slide, a weaker gene term, and
  a cross term between one morphology and one pathway that only a fused model can use. β_g has a
  fixed size on each active pathway (random sign), so the gene signal is set by design, not by a draw.
  The π/μ knob (`pi_share`, null by default: the terms as drawn) rescales β_hᵀz(p) and β_sᵀg so that
  the proportion term carries that share of their summed variance, the sum and every draw kept.
- Weibull times T = (-log U / e^{log h})^{1/k}; censoring C ~ U(0, c_max) with c_max set by
  bisection so that the event rate hits its target (15–40%, like TCGA DSS).
The true log h is kept, for an oracle c-index.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Cohort:
    bags: list            # [N_i, d] float32 patch features per patient (full profile: `bags.SlideBags`, read on demand)
    genes: np.ndarray     # [P, G] expression
    pathways: list        # gene indices of each pathway
    time: np.ndarray
    event: np.ndarray     # bool, True = event observed
    site: np.ndarray      # int site of each patient
    proportions: np.ndarray   # [P, K] true morphology proportions (realised in the bag)
    grade: np.ndarray     # [P, n_graded] true grade shift g_ik of each graded morphology (units of s)
    graded: np.ndarray    # the graded morphologies k ∈ G
    grade_directions: np.ndarray  # [n_graded, d] unit directions u_k
    cross_pair: tuple     # (k*, c*): the morphology and pathway of the cross term
    activity: np.ndarray  # [P, n_pathways] true pathway activity
    log_hazard: np.ndarray    # true log h (oracle)
    centres: np.ndarray   # [K, d]
    coefficients: dict = None   # the hazard's β_h, β_s, β_g (per pathway), γ and the active pathways
    folds: list = None    # full profile: the official split files' (train, test) index pairs
    case_ids: list = None  # full profile: the TCGA case id of each patient

    def __len__(self) -> int:
        return len(self.time)


def make_cohort(cfg, seed: int) -> Cohort:
    """The synthetic cohort of `cfg` (the config's `data` section)."""
    rng = np.random.default_rng(seed)
    k, d, n_pw, n_genes = cfg.n_morphologies, cfg.dim, cfg.n_pathways, cfg.n_genes
    n = cfg.n_patients
    centres = rng.normal(0, cfg.centre_scale, size=(k, d))
    sigma = rng.uniform(cfg.noise_min, cfg.noise_max, size=k)
    site_shift = rng.normal(0, cfg.site_shift, size=(cfg.n_sites, d))
    site = rng.permutation(np.arange(n) % cfg.n_sites)
    props = rng.dirichlet(np.full(k, cfg.dirichlet_alpha), size=n)
    sizes = np.exp(rng.uniform(np.log(cfg.n_patches_min), np.log(cfg.n_patches_max), size=n)).astype(int)
    graded = rng.choice(k, size=cfg.n_graded, replace=False)
    directions = rng.normal(size=(cfg.n_graded, d))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    grade = rng.normal(0, 1, size=(n, cfg.n_graded))
    bags, realised = [], np.zeros((n, k))
    for i in range(n):
        labels = rng.choice(k, size=sizes[i], p=props[i])
        shift = np.zeros((k, d))
        shift[graded] = cfg.grade_shift * grade[i, :, None] * directions   # g_ik s u_k
        x = (centres[labels] + shift[labels] + site_shift[site[i]]
             + sigma[labels, None] * rng.standard_normal((sizes[i], d)))
        bags.append(x.astype(np.float32))
        realised[i] = np.bincount(labels, minlength=k) / sizes[i]
    # transcriptomics
    pathways = [np.sort(rng.choice(n_genes, size=rng.integers(cfg.genes_min, cfg.genes_max + 1), replace=False))
                for _ in range(n_pw)]
    w = rng.normal(0, 1, size=(k, n_pw)) * cfg.morph_to_pathway
    activity = realised @ w + rng.normal(0, 1, size=(n, n_pw))
    activity = (activity - activity.mean(0)) / activity.std(0)
    loadings = np.zeros((n_pw, n_genes))
    for c, genes in enumerate(pathways):
        loadings[c, genes] = rng.normal(1.0, 0.3, size=len(genes))
    genes = activity @ loadings + cfg.gene_noise * rng.standard_normal((n, n_genes))
    # hazard
    beta_h = rng.normal(0, 1, size=k) * cfg.beta_histology
    beta_g = np.zeros(n_pw)
    active = rng.choice(n_pw, size=cfg.n_active_pathways, replace=False)
    beta_g[active] = rng.choice([-1.0, 1.0], size=len(active)) * cfg.beta_genomic   # fixed size, by design
    beta_s = rng.choice([-1.0, 1.0], size=cfg.n_graded) * cfg.beta_grade
    k_star, c_star = int(rng.integers(k)), int(active[0])
    z_p = (realised - realised.mean(0)) / realised.std(0)
    term_pi, term_mu = z_p @ beta_h, grade @ beta_s
    natural_share = float(term_pi.var() / (term_pi.var() + term_mu.var()))
    if cfg.pi_share is not None:
        term_pi, term_mu = pi_mu_terms(term_pi, term_mu, float(cfg.pi_share))
    log_h = (term_pi + term_mu + activity @ beta_g
             + cfg.gamma_cross * z_p[:, k_star] * activity[:, c_star])
    log_h = log_h - log_h.mean()
    t_event = (-np.log(rng.uniform(size=n)) / np.exp(log_h)) ** (1.0 / cfg.weibull_shape)
    u_cens = rng.uniform(size=n)
    lo, hi = 1e-6, 1e6
    for _ in range(200):   # c_max such that P(T < u c_max) hits the target event rate
        mid = np.sqrt(lo * hi)
        rate = np.mean(t_event < u_cens * mid)
        lo, hi = (mid, hi) if rate < cfg.event_rate else (lo, mid)
    c_time = u_cens * np.sqrt(lo * hi)
    event = t_event < c_time
    time = np.minimum(t_event, c_time)
    return Cohort(bags=bags, genes=genes.astype(np.float32), pathways=pathways, time=time, event=event,
                  site=site, proportions=realised, grade=grade, graded=graded, grade_directions=directions,
                  cross_pair=(k_star, c_star), activity=activity, log_hazard=log_h, centres=centres,
                  coefficients={"beta_h": beta_h, "beta_s": beta_s, "beta_g": beta_g, "active": active,
                                "gamma": cfg.gamma_cross, "natural_pi_share": natural_share,
                                "pi_share": float(term_pi.var() / (term_pi.var() + term_mu.var()))})


def pi_mu_terms(term_pi: np.ndarray, term_mu: np.ndarray, share: float) -> tuple[np.ndarray, np.ndarray]:
    """The π/μ knob: the proportion term β_hᵀz(p) and the grade term β_sᵀg rescaled so that the π term
    carries `share` of their summed variance, the sum kept (share 0: only μ carries histology risk;
    1: only π). The draws are untouched, so every share has the same patients, bags and folds."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"data.pi_share must be in [0, 1] (or null: the drawn terms as they are), got {share}")
    total = term_pi.var() + term_mu.var()
    return term_pi * np.sqrt(share * total / term_pi.var()), term_mu * np.sqrt((1 - share) * total / term_mu.var())


def site_folds(site: np.ndarray, n_folds: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Site-disjoint (train, test) index pairs: sites are dealt to folds round-robin."""
    sites = np.unique(site)
    fold_of_site = {s: i % n_folds for i, s in enumerate(sites)}
    fold = np.array([fold_of_site[s] for s in site])
    return [(np.flatnonzero(fold != f), np.flatnonzero(fold == f)) for f in range(n_folds)]


def stratified_folds(event: np.ndarray, n_folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Folds stratified on the event indicator (for data without sites)."""
    from sklearn.model_selection import StratifiedKFold

    skf = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=seed)
    return [(tr, te) for tr, te in skf.split(np.zeros(len(event)), event.astype(int))]


def breast_cancer():
    """scikit-survival's breast-cancer cohort (198 patients, 76 genes): gene expression, time,
    event and the gene names."""
    from sksurv.datasets import load_breast_cancer

    x, y = load_breast_cancer()
    gene_cols = [c for c in x.columns if c.startswith("X")]
    genes = x[gene_cols].to_numpy(dtype=np.float32)
    time = y["t.tdm"].astype(float)
    event = y["e.tdm"].astype(bool)
    return genes, time, event, gene_cols


def gene_groups(genes: np.ndarray, n_groups: int, seed: int) -> list[np.ndarray]:
    """Stand-ins for pathways: K-means on the gene-gene correlation of `genes` (call it on a
    training fold only, so the test patients never shape the groups)."""
    from sklearn.cluster import KMeans

    corr = np.corrcoef(np.asarray(genes, dtype=float).T)
    labels = KMeans(n_clusters=n_groups, n_init=10, random_state=seed).fit_predict(corr)
    return [np.flatnonzero(labels == g) for g in range(n_groups)]
