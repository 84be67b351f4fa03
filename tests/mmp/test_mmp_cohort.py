"""The synthetic cohort: a patient-level grade shift inside graded morphologies reaches the PANTHER
means μ_c, and the hazard is exactly the documented sum of proportion, grade, gene and cross terms."""
import numpy as np
import pytest
import torch

from papers.mmp.data import make_cohort
from papers.mmp.panther import gmm_aggregate
from shared.config import load_config
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
    assert np.count_nonzero(np.abs(coef[k + g:k + g + cfg.data.n_pathways]) > 1e-8) == cfg.data.n_active_pathways
