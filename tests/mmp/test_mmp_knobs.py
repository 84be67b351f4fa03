"""The premise knobs: `data.pi_share` moves the histology risk between π and μ and nothing else, and
the knob experiments write knob samples (one fold sample per point, grouped by cohort and paired by
(cohort, fold)) of every arm and of MMP-Trans minus each arm."""
import numpy as np
import pytest

from papers.mmp.data import make_cohort
from shared.config import load_config
from conftest import REPO

CFG = REPO / "papers" / "mmp" / "config.yaml"


def terms(c):
    z_p = (c.proportions - c.proportions.mean(0)) / c.proportions.std(0)
    return z_p @ c.coefficients["beta_h"], c.grade @ c.coefficients["beta_s"]


@pytest.mark.parametrize("share", [0.0, 0.3, 1.0])
def test_pi_share_sets_the_pi_term_share_and_keeps_every_draw(share):
    base_cfg = load_config(CFG, "smoke", ["data.n_patients=120"])
    cfg = load_config(CFG, "smoke", ["data.n_patients=120", f"data.pi_share={share}"])
    base, c = make_cohort(base_cfg.data, 3), make_cohort(cfg.data, 3)
    assert all(np.array_equal(a, b) for a, b in zip(base.bags, c.bags))
    assert np.array_equal(base.genes, c.genes) and np.array_equal(base.site, c.site)
    t_pi, t_mu = terms(base)
    assert c.coefficients["pi_share"] == pytest.approx(share, abs=1e-12)
    assert base.coefficients["pi_share"] == pytest.approx(t_pi.var() / (t_pi.var() + t_mu.var()))
    # the histology part of log h moved; the sum of the two terms' variances and the rest did not
    other = base.log_hazard - (t_pi + t_mu - (t_pi + t_mu).mean())
    hist = c.log_hazard - other
    scale_pi = np.sqrt(share * (t_pi.var() + t_mu.var()) / t_pi.var())
    scale_mu = np.sqrt((1 - share) * (t_pi.var() + t_mu.var()) / t_mu.var())
    expect = scale_pi * t_pi + scale_mu * t_mu
    np.testing.assert_allclose(hist, expect - expect.mean(), atol=1e-9)


def test_pi_share_null_is_the_drawn_cohort_and_out_of_range_stops():
    cfg = load_config(CFG, "smoke")
    assert cfg.data.pi_share is None
    with pytest.raises(ValueError, match="pi_share"):
        make_cohort(load_config(CFG, "smoke", ["data.pi_share=1.5"]).data, 0)


def test_knob_experiments_write_paired_knob_samples(tmp_path):
    from papers.mmp.experiments import EXPERIMENTS
    from shared.experiment import Run
    from shared.samples import is_knob

    cfg = load_config(CFG, "smoke", ["knobs.pi_share_arms=[mmp_trans,abmil]", "knobs.pi_share=[0.0,1.0]", "knobs.n_folds=3",
                                     "train.epochs=1"])
    out = EXPERIMENTS["pi_share_knob"](Run("mmp", "pi_share_knob", cfg, tmp_path))
    assert out["points"] == [0.0, 1.0] and out["pi_share"] == pytest.approx([0.0, 1.0])
    seeds = list(cfg.knobs.cohort_seeds)
    assert out["cohorts"] == seeds and len(seeds) == 2
    for arm in ("mmp_trans", "abmil"):
        assert is_knob(out["cindex"][arm]) and out["cindex"][arm]["unit"] == "fold"
        for s in out["cindex"][arm]["samples"]:   # knobs.n_folds folds of every cohort, grouped by cohort
            assert s["group_unit"] == "cohort"
            assert s["groups"] == [c for c in seeds for _ in range(cfg.knobs.n_folds)]
    g = out["trans_minus"]["abmil"]
    for j in range(2):   # the gap at each point is the (cohort, fold)-wise difference of the two arms' samples
        a, b = out["cindex"]["mmp_trans"]["samples"][j], out["cindex"]["abmil"]["samples"][j]
        assert g["samples"][j]["values"] == pytest.approx(np.subtract(a["values"], b["values"]))
        assert g["samples"][j]["groups"] == a["groups"] and g["samples"][j]["test_train_ratio"] > 0
    assert (tmp_path / "tables" / "pi_share_knob.md").is_file()
