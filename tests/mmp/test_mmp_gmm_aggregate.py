"""gmm_aggregate: one EM step against sklearn's GaussianMixture, shapes, dtype, masks, batching."""
import numpy as np
import pytest
import torch
from sklearn.mixture import GaussianMixture

from papers.mmp import gmm_aggregate


def bag(n=300, d=5, c=4, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 3, size=(c, d))
    x = centres[rng.integers(c, size=n)] + rng.normal(size=(n, d))
    protos = centres + 0.3 * rng.normal(size=(c, d))
    return x, protos


@pytest.mark.parametrize("eps", [0.1, 1.0])
def test_one_em_step_matches_sklearn_as_tau_goes_to_zero(eps):
    x, protos = bag()
    c, d = protos.shape
    gm = GaussianMixture(c, covariance_type="diag", max_iter=1, reg_covar=0.0, weights_init=np.full(c, 1 / c),
                         means_init=protos, precisions_init=np.full((c, d), 1 / eps), n_init=1, random_state=0)
    with pytest.warns(Warning):   # sklearn: did not converge after one iteration
        gm.fit(x)
    pi, mu, var = gmm_aggregate(torch.from_numpy(x), protos, tau=1e-12, eps=eps, n_iter=1)
    np.testing.assert_allclose(pi.numpy(), gm.weights_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(mu.numpy(), gm.means_, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(var.numpy(), gm.covariances_, rtol=1e-6, atol=1e-8)


def test_map_prior_pulls_to_prototypes():
    x, protos = bag()
    pi, mu, var = gmm_aggregate(torch.from_numpy(x), protos, tau=1e9, eps=0.1)
    np.testing.assert_allclose(pi.numpy(), 0.25, atol=1e-6)
    np.testing.assert_allclose(mu.numpy(), protos, atol=1e-5)
    np.testing.assert_allclose(var.numpy(), 0.1, atol=1e-4)


def test_shapes_dtypes_and_batch():
    x, protos = bag(d=6, c=3)
    x32 = torch.from_numpy(x).float()
    pi, mu, var = gmm_aggregate(x32, protos)
    assert pi.shape == (3,) and mu.shape == (3, 6) and var.shape == (3, 6)
    assert pi.dtype == mu.dtype == var.dtype == torch.float32
    assert gmm_aggregate(torch.from_numpy(x), protos)[0].dtype == torch.float64
    batch = torch.stack([x32, x32.flip(0) * 0.5])
    pib, mub, varb = gmm_aggregate(batch, protos)
    assert pib.shape == (2, 3) and mub.shape == (2, 3, 6) and varb.shape == (2, 3, 6)
    torch.testing.assert_close(pib[0], pi)
    torch.testing.assert_close(mub[0], mu)
    torch.testing.assert_close(varb[1], gmm_aggregate(x32.flip(0) * 0.5, protos)[2])
    torch.testing.assert_close(pib.sum(-1), torch.ones(2))


def test_mask_ignores_padding_and_two_em_steps_run():
    x, protos = bag(n=200)
    padded = np.concatenate([x, 1e3 * np.ones((50, x.shape[1]))])
    mask = np.r_[np.ones(200, bool), np.zeros(50, bool)]
    for n_iter in (1, 2):
        ref = gmm_aggregate(torch.from_numpy(x), protos, n_iter=n_iter)
        got = gmm_aggregate(torch.from_numpy(padded)[None], protos, mask=torch.from_numpy(mask)[None], n_iter=n_iter)
        for a, b in zip(ref, got):
            torch.testing.assert_close(b[0], a)


def test_deterministic():
    x, protos = bag()
    a = gmm_aggregate(torch.from_numpy(x).float(), protos)
    b = gmm_aggregate(torch.from_numpy(x).float(), protos)
    for u, v in zip(a, b):
        assert torch.equal(u, v)


def test_padded_batches_give_each_bags_tokens():
    """The device path (padded, masked batches; forced here on the CPU) equals one bag at a time, with
    bags of different lengths split over several batches by `max_elements`."""
    import numpy as np

    from papers.mmp.panther import aggregate_bags

    rng = np.random.default_rng(0)
    bags = [rng.normal(size=(n, 6)).astype(np.float32) for n in (30, 7, 55, 12, 40)]
    protos = rng.normal(size=(4, 6)).astype(np.float32)
    kw = dict(tau=1e-3, eps=0.1, n_iter=2)
    one = aggregate_bags(bags, protos, **kw)
    batched = aggregate_bags(bags, protos, **kw, batched=True, max_elements=3 * 55 * 6)
    assert batched.shape == one.shape == (5, 4, 13)
    np.testing.assert_allclose(batched, one, rtol=1e-5, atol=1e-6)
    swapped = aggregate_bags(bags[::-1], protos, **kw, batched=True, max_elements=3 * 55 * 6)
    assert not np.allclose(swapped, one)   # the order of the bags is kept
