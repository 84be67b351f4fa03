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
    from papers.mmp.experiments.arms import ARM_NAMES, fit_predict, fit_predict_prototype_cox, prepare_fold

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


@pytest.mark.interpreter   # the Sinkhorn kernel itself (Triton interpreter on CPU) against POT
def test_batched_ot_plans_and_gradients_match_pot_per_patient():
    """The batched Sinkhorn (kernels.sinkhorn_unbalanced) against POT's torch backend, one patient at
    a time as the official code runs it: plans and the gradients of a loss through them, float64."""
    import ot

    from papers.mmp.models import batched_ot_plans

    rng = np.random.default_rng(1)
    scale = torch.tensor([0.5, 1.0, 3.0, 8.0])[:, None, None]          # patients stop at different iterations
    z_h0 = torch.tensor(rng.normal(size=(4, 16, 12))) * scale
    z_p0 = torch.tensor(rng.normal(size=(4, 50, 12)))
    weight = torch.tensor(rng.normal(size=(16, 50)))

    z_h, z_p = z_h0.clone().requires_grad_(True), z_p0.clone().requires_grad_(True)
    plans = batched_ot_plans(z_h, z_p, reg=0.1, reg_m=0.5, num_iter_max=1000, stop_thr=1e-6)
    (plans * weight).sum().backward()

    ref_plans, ref_gh, ref_gp = [], [], []
    for i in range(4):
        zh, zp = z_h0[i].clone().requires_grad_(True), z_p0[i].clone().requires_grad_(True)
        a, b = zh - zh.min(-1, keepdim=True).values, zp - zp.min(-1, keepdim=True).values
        cost = torch.cdist(a, b) ** 2
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            plan = ot.unbalanced.sinkhorn_knopp_unbalanced(torch.full((16,), 1 / 16, dtype=torch.float64),
                                                           torch.full((50,), 1 / 50, dtype=torch.float64),
                                                           cost / cost.max(), 0.1, 0.5, reg_type="entropy",
                                                           numItermax=1000, stopThr=1e-6)
        (plan * weight).sum().backward()
        ref_plans.append(plan.detach())
        ref_gh.append(zh.grad)
        ref_gp.append(zp.grad)
    torch.testing.assert_close(plans.detach(), torch.stack(ref_plans), rtol=1e-6, atol=1e-12)
    torch.testing.assert_close(z_h.grad, torch.stack(ref_gh), rtol=1e-6, atol=1e-10)
    torch.testing.assert_close(z_p.grad, torch.stack(ref_gp), rtol=1e-6, atol=1e-10)


def test_mmp_ot_batched_solver_trains_like_the_pot_loop():
    """One MMP-OT training step: same loss and parameter gradients with either solver."""
    from papers.mmp.losses import cox_loss

    batch = {"hist": torch.randn(6, 3, 9), "genes": torch.randn(6, 30)}
    time, event = torch.rand(6), torch.tensor([1, 0, 1, 1, 0, 1], dtype=torch.bool)
    grads = {}
    for solver in ("batched", "pot"):
        model = mmp("ot").eval()
        model.ot_solver = solver
        cox_loss(model(batch)[:, 0], time, event).backward()
        grads[solver] = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    torch.testing.assert_close(grads["batched"], grads["pot"], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("modality,ignored", [("histo", "genes"), ("gene", "hist")])
def test_unimodal_arms_ignore_the_other_modality(modality, ignored):
    torch.manual_seed(0)
    pathways = [np.arange(i, i + 5) for i in range(0, 30, 5)]
    model = MMP(9, 3, pathways, dim=8, code_dim=4, snn_dropout=0.25, dropout=0.1, n_out=1,
                modality=modality).eval()
    batch = {"hist": torch.randn(5, 3, 9), "genes": torch.randn(5, 30)}
    other = dict(batch, **{ignored: torch.randn_like(batch[ignored])})
    torch.testing.assert_close(model(batch), model(other))
    kept = "hist" if ignored == "genes" else "genes"
    assert not torch.allclose(model(batch), model(dict(batch, **{kept: torch.randn_like(batch[kept])})))


def test_standardize_pi_zscores_pi_on_the_training_fold_only():
    from papers.mmp.data import make_cohort, site_folds
    from papers.mmp.experiments.arms import prepare_fold

    cfg = load_config(CFG, "smoke")
    cohort = make_cohort(cfg.data, 0)
    tr, te = site_folds(cohort.site, cfg.eval.n_folds)[0]
    raw = prepare_fold(cohort, tr, cfg, 0, 0)
    std = prepare_fold(cohort, tr, cfg, 0, 0, standardize_pi=True)
    pi = std["data"]["hist"][:, :, 0].numpy()
    np.testing.assert_allclose(pi[tr].mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(pi[tr].std(0), 1, atol=1e-4)
    np.testing.assert_array_equal(std["data"]["hist"][:, :, 1:], raw["data"]["hist"][:, :, 1:])   # μ, Σ untouched
    np.testing.assert_array_equal(std["pi"], raw["data"]["hist"][:, :, 0].numpy())               # raw π kept


@pytest.mark.parametrize("modality", ["both", "histo"])
def test_value_residual_adds_each_tokens_own_value(modality):
    """`model.value_residual` adds each token's own value V to the attention output A V (the switch the
    official token lacks); the attention map itself is unchanged."""
    torch.manual_seed(0)
    kw = dict(dim=8, code_dim=4, snn_dropout=0.0, dropout=0.0, n_out=4, modality=modality)
    pathways = [[0, 1], [2, 3, 4]]
    plain, residual = MMP(6, 3, pathways, **kw), MMP(6, 3, pathways, value_residual=True, **kw)
    residual.load_state_dict(plain.state_dict())
    z = torch.randn(2, 5, 12)
    (a0, h0), (a1, h1) = plain.attention(z), residual.attention(z)
    v = plain.qkv(plain.norm(z)).chunk(3, dim=-1)[2]
    assert torch.equal(a0, a1)
    assert torch.allclose(h1, h0 + v, atol=1e-6) and not torch.allclose(h1, h0)
