"""The synthetic cohort: a patient-level grade shift inside graded morphologies reaches the PANTHER
means μ_c, the hazard is exactly the documented sum of proportion, grade, gene and cross terms, and
the tiny cohort's oracle ceilings keep the designed order (genes above chance, below histology)."""
import numpy as np
import pytest
import torch

from papers.mmp.data import make_cohort, site_folds
from papers.mmp.experiments.oracle_ceilings import ceiling_scores
from papers.mmp.panther import gmm_aggregate
from shared.config import load_config
from shared.intervals import mean_interval
from conftest import REPO

CFG = REPO / "papers" / "mmp" / "config.yaml"


def cohort(**data):
    cfg = load_config(CFG, "smoke", [f"data.{k}={v}" for k, v in data.items()])
    return cfg, make_cohort(cfg.data, 1)


def test_grade_shift_moves_the_gmm_mean_of_graded_morphologies():
    cfg, c = cohort(n_patches_min=800, n_patches_max=1200, n_patients=40, centre_scale=3.0)
    for j, k in enumerate(c.graded):
        u = c.grade_directions[j]
        shift = []
        for bag in c.bags:   # one EM step from the true centres: μ_k is the mean of morphology k's patches
            _, mu, _ = gmm_aggregate(torch.from_numpy(bag), c.centres.astype(np.float32), tau=1e-3, eps=0.1)
            shift.append(float((mu[k].numpy() - c.centres[k]) @ u))
        r = np.corrcoef(shift, c.grade[:, j])[0, 1]
        assert r > 0.9, f"graded morphology {k}: corr(μ_k·u_k, g) = {r:.2f}"
        slope = np.polyfit(c.grade[:, j], shift, 1)[0]
        assert slope == pytest.approx(cfg.data.grade_shift, rel=0.25)


def test_hazard_is_proportions_plus_grade_plus_genes_plus_cross_term():
    cfg, c = cohort(n_patients=200)
    k_star, c_star = c.cross_pair
    z_p = (c.proportions - c.proportions.mean(0)) / c.proportions.std(0)
    x = np.column_stack([z_p, c.grade, c.activity, z_p[:, k_star] * c.activity[:, c_star], np.ones(len(c))])
    coef, *_ = np.linalg.lstsq(x, c.log_hazard, rcond=None)
    np.testing.assert_allclose(x @ coef, c.log_hazard, atol=1e-8)          # nothing else enters
    k, g = cfg.data.n_morphologies, cfg.data.n_graded
    np.testing.assert_allclose(np.abs(coef[k:k + g]), cfg.data.beta_grade, rtol=1e-6)
    assert coef[-2] == pytest.approx(cfg.data.gamma_cross, rel=1e-6)
    beta_g = coef[k + g:k + g + cfg.data.n_pathways]
    assert np.count_nonzero(np.abs(beta_g) > 1e-8) == cfg.data.n_active_pathways
    np.testing.assert_allclose(np.abs(beta_g[np.abs(beta_g) > 1e-8]), cfg.data.beta_genomic, rtol=1e-6)   # fixed size


def test_tiny_cohort_gene_ceiling_is_above_chance_and_below_histology():
    """The world's design (README, "gene signal by design"): at tiny, a linear Cox on the true pathway
    activities beats chance by its 90% interval over the 5 folds, stays below the proportion and
    grade ceilings, and the fused ceiling (with the cross term) is above every single-modality one."""
    cfg = load_config(CFG, "tiny")
    c = make_cohort(cfg.data, cfg.seed)
    s = {k: np.asarray(v) for k, v in ceiling_scores(c, site_folds(c.site, cfg.eval.n_folds),
                                                      cfg.eval.prototype_cox_penalizer).items()}
    lo, hi = mean_interval(s["genes"])[:2]
    assert lo > 0.5, f"gene ceiling {s['genes'].mean():.3f} [{lo:.3f}, {hi:.3f}] is not above chance"
    assert s["genes"].mean() < min(s["proportions"].mean(), s["grade"].mean())
    assert s["all"].mean() > max(s[k].mean() for k in ("proportions", "grade", "genes"))
