"""k-means selections: representative concepts for the base model, minimal data per concept.

Both keep, for each of the k centroids, the member nearest to it (the paper's rule for prompts,
applied to image features for data reduction). Features are standardised first (zero mean, unit
variance per column), so no feature dominates the distance by its scale alone.
"""
from __future__ import annotations

import numpy as np
from sklearn.cluster import KMeans


def nearest_to_centroids(features: np.ndarray, k: int, seed: int) -> list[int]:
    """Indices of the k samples nearest the k-means centroids (one per cluster, distinct)."""
    from sklearn.preprocessing import StandardScaler

    features = StandardScaler().fit_transform(np.asarray(features, np.float64))
    km = KMeans(n_clusters=k, n_init=10, random_state=seed).fit(features)
    chosen: list[int] = []
    for c in range(k):
        d = np.linalg.norm(features - km.cluster_centers_[c], axis=1)
        d[chosen] = np.inf
        chosen.append(int(np.argmin(d)))
    return chosen


def random_subset(n: int, k: int, seed: int) -> list[int]:
    return sorted(np.random.default_rng(seed).choice(n, size=k, replace=False).tolist())
