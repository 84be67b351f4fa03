"""MMP-OT's transport against POT's NumPy backend; forward shapes, determinism and training of
every arm on a smoke-sized synthetic cohort."""
import warnings

import numpy as np
import pytest
import torch

from papers.mmp.models import MMP, unbalanced_ot_plan
from shared.config import load_config
from conftest import REPO

CFG = REPO / "papers" / "mmp" / "config.yaml"


def test_ot_plan_matches_pot_numpy_and_is_differentiable():
    import ot

    rng = np.random.default_rng(0)
    z_h = torch.tensor(rng.normal(size=(16, 12)), requires_grad=True)
    z_p = torch.tensor(rng.normal(size=(50, 12)))
    plan = unbalanced_ot_plan(z_h, z_p, reg=0.1, reg_m=0.5, num_iter_max=1000, stop_thr=1e-6)
    zh = z_h.detach().numpy() - z_h.detach().numpy().min(1, keepdims=True)
    zp = z_p.numpy() - z_p.numpy().min(1, keepdims=True)
    cost = ((zh[:, None] - zp[None]) ** 2).sum(-1)
    cost /= cost.max()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = ot.unbalanced.sinkhorn_unbalanced(np.full(16, 1 / 16), np.full(50, 1 / 50), cost, 0.1, 0.5,
                                                reg_type="entropy", numItermax=1000, stopThr=1e-6)
    np.testing.assert_allclose(plan.detach().numpy(), ref, rtol=1e-6, atol=1e-12)
    # 'entropy' (POT 0.9.4's default) differs from POT >= 0.9.5's default 'kl'
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kl = ot.unbalanced.sinkhorn_unbalanced(np.full(16, 1 / 16), np.full(50, 1 / 50), cost, 0.1, 0.5)
    assert not np.allclose(kl, ref)
    plan.sum().backward()
    assert torch.isfinite(z_h.grad).all() and z_h.grad.abs().sum() > 0


def mmp(fusion, double_softmax=True):
    torch.manual_seed(0)
    pathways = [np.arange(i, i + 5) for i in range(0, 30, 5)]
    return MMP(2 * 4 + 1, 3, pathways, dim=8, code_dim=4, snn_dropout=0.25, dropout=0.1, n_out=1,
               fusion=fusion, double_softmax=double_softmax)


@pytest.mark.parametrize("fusion", ["trans", "ot"])
def test_mmp_shapes_maps_and_determinism(fusion):
    batch = {"hist": torch.randn(5, 3, 9), "genes": torch.randn(5, 30)}
    model = mmp(fusion).eval()
    out, fmap = model(batch, return_map=True)
    assert out.shape == (5, 1)
    assert fmap.shape == ((5, 9, 9) if fusion == "trans" else (5, 3, 6))
    if fusion == "trans":
        torch.testing.assert_close(fmap.sum(-1), torch.ones(5, 9))
        assert not torch.allclose(mmp(fusion, double_softmax=False).eval()(batch), out)
    assert torch.equal(mmp(fusion).eval()(batch), out)
    # a patient's output does not depend on the rest of the batch
    torch.testing.assert_close(model({k: v[:1] for k, v in batch.items()}), out[:1])


def test_every_arm_trains_at_smoke(tmp_path):
    from papers.mmp.data import make_cohort, site_folds
    from papers.mmp.experiments import ARM_NAMES, fit_predict, fit_predict_prototype_cox, prepare_fold

    cfg = load_config(CFG, "smoke")
    cohort = make_cohort(cfg.data, 0)
    assert cohort.event.mean() == pytest.approx(cfg.data.event_rate, abs=0.05)
    tr, te = site_folds(cohort.site, cfg.eval.n_folds)[0]
    assert not set(cohort.site[tr]) & set(cohort.site[te])
    fd = prepare_fold(cohort, tr, cfg, 0, 0)
    assert fd["data"]["hist"].shape == (len(cohort), cfg.prototypes.n, 2 * cfg.data.dim + 1)
    for arm in sorted(set(ARM_NAMES) - {"prototype_cox"}):
        _, risk = fit_predict(arm, cfg, cohort, fd, tr, te, 0, 0)
        assert risk.shape == (len(te),) and np.isfinite(risk).all()
        _, again = fit_predict(arm, cfg, cohort, fd, tr, te, 0, 0)
        np.testing.assert_array_equal(risk, again)
    _, risk = fit_predict("mmp_trans", cfg, cohort, fd, tr, te, 0, 0, loss="nll", batch_size=1)
    assert np.isfinite(risk).all()
    risk = fit_predict_prototype_cox(cfg, cohort, fd, tr, te)
    assert risk.shape == (len(te),) and np.isfinite(risk).all()


def test_generator_is_seeded_and_in_range():
    from papers.mmp.data import make_cohort

    cfg = load_config(CFG, "smoke")
    a, b = make_cohort(cfg.data, 3), make_cohort(cfg.data, 3)
    np.testing.assert_array_equal(a.time, b.time)
    np.testing.assert_array_equal(a.bags[5], b.bags[5])
    sizes = [len(x) for x in a.bags]
    assert cfg.data.n_patches_min <= min(sizes) and max(sizes) <= cfg.data.n_patches_max
    np.testing.assert_allclose(a.proportions.sum(1), 1.0)
