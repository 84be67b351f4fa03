"""k-means selections, metrics against reference implementations, training FLOPs."""
import numpy as np
import torch
from skimage.metrics import peak_signal_noise_ratio
from sklearn.cluster import KMeans
from sklearn.preprocessing import StandardScaler

from papers.e2gan.metrics import feature_fd, frechet_distance, psnr
from papers.e2gan.selection import nearest_to_centroids, random_subset


def test_kmeans_subset_picks_samples_nearest_the_centroids():
    rng = np.random.default_rng(0)
    feats = rng.normal(size=(60, 5))
    chosen = nearest_to_centroids(feats, 6, seed=1)
    z = StandardScaler().fit_transform(feats)
    km = KMeans(n_clusters=6, n_init=10, random_state=1).fit(z)
    expected = sorted(int(np.argmin(np.linalg.norm(z - c, axis=1))) for c in km.cluster_centers_)
    assert chosen == expected and len(set(chosen)) == 6
    centres = np.array([[0, 0], [10, 0], [0, 10]])
    blobs = np.concatenate([c + 0.1 * rng.normal(size=(20, 2)) for c in centres])
    picked = nearest_to_centroids(blobs, 3, seed=0)
    assert sorted(i // 20 for i in picked) == [0, 1, 2]
    assert random_subset(50, 5, 3) == random_subset(50, 5, 3) and len(set(random_subset(50, 5, 3))) == 5


def test_kmeans_selection_does_not_depend_on_how_kmeans_numbers_its_clusters(monkeypatch):
    """The same partition numbered differently (as OpenBLAS's core types did on E2GAN's tiny pool) gives the
    same selection, even where two centroids share their nearest sample (the one visited first takes it)."""
    import papers.e2gan.selection as selection

    feats = np.array([[0.0], [1.0], [2.0], [5.0], [9.0]])
    z = StandardScaler().fit_transform(feats)
    eps = 1e-3
    # A and B both nearest sample 1; A is nearer to it, so A takes it and B its next nearest (sample 2);
    # visited the other way round, B would take 1 and A would fall back to sample 0
    centres = np.array([z[1] - eps, z[1] + 2 * eps, z[3], z[4]])
    results = []
    for perm in ([0, 1, 2, 3], [1, 0, 3, 2], [3, 1, 2, 0]):
        class Numbered:
            def __init__(self, **kwargs):
                pass

            def fit(self, x, perm=perm):
                self.cluster_centers_ = centres[perm]
                return self
        monkeypatch.setattr(selection, "KMeans", Numbered)
        results.append(nearest_to_centroids(feats, 4, seed=0))
    assert results == [[1, 2, 3, 4]] * 3


def test_kmeans_standardises_features_first():
    # column 0: wide noise on a huge scale; column 1: three tight groups on a small scale. Unscaled,
    # k-means would cut column 0; standardised, the three groups are the clusters.
    rng = np.random.default_rng(0)
    group = np.repeat([0, 1, 2], 30)
    feats = np.stack([1e4 * rng.uniform(-1, 1, 90), 1e-3 * (group + 0.02 * rng.normal(size=90))], 1)
    picked = nearest_to_centroids(feats, 3, seed=0)
    assert sorted(group[picked]) == [0, 1, 2]


def test_psnr_matches_skimage():
    rng = np.random.default_rng(0)
    a, b = rng.uniform(size=(3, 8, 8, 3)), rng.uniform(size=(3, 8, 8, 3))
    ref = peak_signal_noise_ratio(a, b, data_range=1.0)   # skimage pools the MSE over the whole stack
    assert abs(psnr(b, a) - ref) < 1e-9
    # an unchanged image copied exactly no longer dominates: pooled, not a mean of per-image PSNRs
    b[0] = a[0]
    assert psnr(b, a) < 20 < np.mean([peak_signal_noise_ratio(x, y, data_range=1.0) if not np.array_equal(x, y)
                                       else 120.0 for x, y in zip(a, b)])


def test_frechet_distance():
    mu, sigma = np.zeros(3), np.eye(3)
    assert abs(frechet_distance(mu, sigma, mu, sigma)) < 1e-9
    # 1-d closed form: (m1 - m2)^2 + (s1 - s2)^2
    assert abs(frechet_distance(np.array([1.0]), np.array([[4.0]]), np.array([0.0]), np.array([[1.0]])) - 2.0) < 1e-9
    rng = np.random.default_rng(0)
    imgs = rng.uniform(size=(12, 16, 16, 3))
    assert feature_fd(imgs, imgs, dims=4) < 1e-6 < feature_fd(imgs * 0.3, imgs, dims=4)


def test_lora_step_counts_fewer_flops_than_full_training():
    from papers.e2gan.lora import add_lora
    from papers.e2gan.models import CRUCIAL_GROUPS, E2GANGenerator, PatchDiscriminator
    from papers.e2gan.train import Pairs, train_gan

    torch.manual_seed(0)
    x = torch.rand(8, 3, 16, 16) * 2 - 1
    pairs = Pairs(x, -x, torch.randn(1, 2, 8), torch.ones(1, 2, dtype=torch.bool), torch.zeros(8, dtype=torch.long))
    full = train_gan(E2GANGenerator(4, 8, 2), PatchDiscriminator(8), pairs, 1, seed=0, batch_size=4)
    lora = train_gan(add_lora(E2GANGenerator(4, 8, 2), {g: 1 for g in CRUCIAL_GROUPS}), PatchDiscriminator(8),
                     pairs, 1, seed=0, batch_size=4)
    assert 0 < lora["flops_per_step"] < full["flops_per_step"]
    assert lora["trainable_params"] < full["trainable_params"] / 5


def test_base_cache_key_ignores_the_adapters_lr_but_not_the_base_lr(tmp_path):
    """A base model's cache file is named by what its training reads: train.lora_lr (the adapters'
    step size) must not retrain the bases; train.lr must."""
    import copy
    from types import SimpleNamespace

    from papers.e2gan.experiments.bases import base_path
    from shared.config import load_config

    cfg = load_config("papers/e2gan/config.yaml", "smoke")
    path = base_path(SimpleNamespace(cfg=cfg, seed=0, out=tmp_path), "clustered")
    other = copy.deepcopy(cfg)
    other["train"]["lora_lr"] = 1.0
    assert base_path(SimpleNamespace(cfg=other, seed=0, out=tmp_path), "clustered") == path
    other["train"]["lr"] = 1.0
    assert base_path(SimpleNamespace(cfg=other, seed=0, out=tmp_path), "clustered") != path
