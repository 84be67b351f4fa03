"""cox_loss against lifelines' partial likelihood; the NLL loss against a direct formula; c-index."""
import numpy as np
import pandas as pd
import torch

from papers.mmp import cox_loss
from papers.mmp.losses import nll_bins, nll_loss, nll_risk, to_bins
from papers.mmp.metrics import cindex


def cohort(n=80, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    t = rng.exponential(np.exp(-x @ np.array([0.8, -0.5, 0.2])))
    c = rng.exponential(2.0, size=n)
    return x, np.minimum(t, c), t < c


def test_cox_loss_matches_lifelines_partial_likelihood():
    from lifelines import CoxPHFitter

    x, time, event = cohort()
    assert len(np.unique(time)) == len(time)   # no ties
    df = pd.DataFrame(x, columns=["a", "b", "c"]).assign(T=time, E=event.astype(int))
    cph = CoxPHFitter().fit(df, "T", "E")
    eta = torch.from_numpy(x @ cph.params_.to_numpy())
    loss = cox_loss(eta, torch.from_numpy(time), torch.from_numpy(event))
    np.testing.assert_allclose(-loss.item() * event.sum(), cph.log_likelihood_, rtol=1e-8)


def test_cox_loss_no_events_is_zero_and_differentiable():
    eta = torch.randn(5, requires_grad=True)
    loss = cox_loss(eta, torch.rand(5), torch.zeros(5, dtype=torch.bool))
    assert loss.item() == 0.0
    loss.backward()
    x, time, event = cohort(20)
    eta = torch.zeros(20, requires_grad=True)
    cox_loss(eta, time, event).backward()
    assert torch.isfinite(eta.grad).all() and eta.grad.abs().sum() > 0


def test_nll_loss_matches_direct_formula():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(6, 4))
    y = np.array([0, 1, 2, 3, 1, 0])
    event = np.array([1, 0, 1, 0, 1, 1], bool)
    alpha = 0.5
    h = 1 / (1 + np.exp(-logits))
    s = np.cumprod(1 - h, axis=1)
    s_pad = np.c_[np.ones(6), s]
    c = (~event).astype(float)
    u = np.log(s_pad[np.arange(6), y]) + np.log(h[np.arange(6), y])
    ref = (1 - alpha) * (-c * np.log(s_pad[np.arange(6), y + 1]) - (1 - c) * u) - alpha * (1 - c) * u
    got = nll_loss(torch.from_numpy(logits), torch.from_numpy(y), torch.from_numpy(event), alpha=alpha)
    np.testing.assert_allclose(got.item(), ref.mean(), rtol=1e-10)
    np.testing.assert_allclose(nll_risk(torch.from_numpy(logits)).numpy(), -s.sum(1), rtol=1e-10)


def test_nll_bins_are_quantiles_of_event_times():
    _, time, event = cohort(200)
    edges = nll_bins(time, event, 4)
    y = to_bins(time[event], edges)
    assert edges[0] == 0 and np.isinf(edges[-1])
    counts = np.bincount(y, minlength=4)
    assert counts.min() >= event.sum() // 4 - 1


def test_cindex_matches_lifelines():
    from lifelines.utils import concordance_index

    x, time, event = cohort(150, seed=3)
    risk = x[:, 0] + 0.5 * np.random.default_rng(0).normal(size=150)
    np.testing.assert_allclose(cindex(time, event, risk), concordance_index(time, -risk, event), rtol=1e-12)
