"""k-means selections: representative concepts for the base model, minimal data per concept.

Both keep, for each of the k centroids, the member nearest to it (the paper's rule for prompts,
applied to image features for data reduction). Features are standardised first (zero mean, unit
variance per column), so no feature dominates the distance by its scale alone.
"""
from __future__ import annotations

import numpy as np
from sklearn.cluster import KMeans


def nearest_to_centroids(features: np.ndarray, k: int, seed: int) -> list[int]:
    """Indices of the k samples nearest the k-means centroids (one per cluster, distinct), ascending.

    k-means numbers its clusters in an order that moves with the last bits of its BLAS calls (with the
    same seed: OpenBLAS's Haswell kernels and its Prescott/SkylakeX ones gave one partition, numbered
    differently, on E2GAN's tiny pool). So the clusters are visited in a canonical order, by the index of
    the sample nearest each (a cluster whose nearest sample is taken gets its next nearest), and the
    result is sorted: the same partition gives the same selection, in the same order, on every machine.
    """
    from sklearn.preprocessing import StandardScaler

    features = StandardScaler().fit_transform(np.asarray(features, np.float64))
    km = KMeans(n_clusters=k, n_init=10, random_state=seed).fit(features)
    dist = np.linalg.norm(features[:, None, :] - km.cluster_centers_[None], axis=2)   # (n, k)
    order = sorted(range(k), key=lambda c: (int(np.argmin(dist[:, c])), float(dist[:, c].min())))
    chosen: list[int] = []
    for c in order:
        d = dist[:, c].copy()
        d[chosen] = np.inf
        chosen.append(int(np.argmin(d)))
    return sorted(chosen)


def random_subset(n: int, k: int, seed: int) -> list[int]:
    return sorted(np.random.default_rng(seed).choice(n, size=k, replace=False).tolist())
