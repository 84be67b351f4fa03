"""PANTHER aggregation: histology prototypes and one MAP-EM step of a diagonal GMM.

Prototypes m_c (c = 1..C) are K-means centres of training-fold patch features. A bag X = {x_n}
is summarised by a diagonal Gaussian mixture started at π_c = 1/C, μ_c = m_c, Σ_c = ε·1:

    E-step   log p_nc = -½[d log 2π + Σ_j log Σ_cj + Σ_j (x_nj - μ_cj)² / Σ_cj] + log π_c
             q_nc = softmax_c(log p_nc)                       (padded patches get q = 0)
    M-step   W_c = Σ_n q_nc + τ ;  π_c = W_c / Σ_c' W_c'
             μ_c = (Σ_n q_nc x_n + τ m_c) / W_c
             Σ_c = (Σ_n q_nc x_n² + τ (ε + m_c²)) / W_c - μ_c²

The defaults are those the official code actually runs: 1 EM step, τ = 1e-3, ε = 0.1. Token c is
[π_c, μ_c, Σ_c] (2d + 1 numbers).
"""
from __future__ import annotations

import numpy as np
import torch

from kernels.gmm_estep import gmm_estep


def gmm_aggregate(features, prototypes, *, tau: float = 1e-3, eps: float = 0.1, n_iter: int = 1, mask=None):
    """MAP-EM of a diagonal GMM started at `prototypes`; returns (pi, mu, var).

    features: [N, d] or [B, N, d] (tensor or array); prototypes: [C, d]; mask: [N] or [B, N], True
    for real patches (padding False). Shapes out: [B, C], [B, C, d], [B, C, d] (B dropped for 2-D
    input). Computed in the input's float dtype (float32 or float64).
    """
    x = torch.as_tensor(features)
    if not x.is_floating_point():
        x = x.float()
    squeeze = x.dim() == 2
    if squeeze:
        x = x[None]
    b, n, d = x.shape
    m = torch.as_tensor(prototypes, dtype=x.dtype, device=x.device)
    c = m.shape[0]
    if mask is None:
        valid = torch.ones(b, n, dtype=x.dtype, device=x.device)
    else:
        valid = torch.as_tensor(mask, device=x.device).reshape(b, n).to(x.dtype)
    pi = torch.full((b, c), 1.0 / c, dtype=x.dtype, device=x.device)
    mu = m.expand(b, c, d).clone()
    var = torch.full((b, c, d), eps, dtype=x.dtype, device=x.device)
    for _ in range(n_iter):
        # E-step + MAP M-step: the fused kernel on CUDA, its torch reference elsewhere (kernels/gmm_estep)
        pi, mu, var = gmm_estep(x, valid > 0, pi, mu, var, m, tau=tau, eps=eps)
    if squeeze:
        return pi[0], mu[0], var[0]
    return pi, mu, var


def tokens(pi, mu, var) -> torch.Tensor:
    """Histology tokens [.., C, 2d+1] = [π_c, μ_c, Σ_c]."""
    return torch.cat([pi[..., None], mu, var], dim=-1)


def fit_prototypes(bags, n_prototypes: int, *, per_bag: int, seed: int,
                   max_iter: int = 50, n_init: int = 3) -> np.ndarray:
    """K-means centres on the first `per_bag` patches of every training bag (the official
    sampling takes each slide's first n patches, not a random draw). `bags` may be any iterable of
    [N, d] arrays (a generator over lazily read bags): only each bag's first rows are kept, copied, so
    a read bag is freed before the next one is read."""
    from sklearn.cluster import KMeans

    sample = np.concatenate([np.array(bag[:per_bag]) for bag in bags]).astype(np.float64)
    km = KMeans(n_clusters=n_prototypes, max_iter=max_iter, n_init=n_init, random_state=seed).fit(sample)
    return km.cluster_centers_.astype(np.float32)


def aggregation_device(name: str = "auto") -> torch.device:
    """Where the bags are aggregated: `auto` is CUDA when present (padded batches through the fused
    `gmm_estep` Triton kernel), else the CPU (one bag at a time, the torch reference)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def aggregate_bags(bags, prototypes: np.ndarray, *, tau: float, eps: float, n_iter: int,
                   device: str | torch.device = "cpu", batched: bool | None = None,
                   max_elements: int = 2**28) -> np.ndarray:
    """Histology tokens [P, C, 2d+1] of every bag, without gradient; lazily read bags are read as the
    loop reaches them.

    On the CPU (default) one bag at a time. On CUDA (or `batched=True`) consecutive bags are padded
    into batches [B, N_max, d] of at most `max_elements` numbers (1 GiB of fp32 by default), masked,
    moved to `device` and aggregated together: on CUDA that is one `gmm_estep` kernel launch per batch.
    Padded rows get q = 0, so a batch gives each bag's tokens up to float rounding."""
    device = torch.device(device)
    if batched is None:
        batched = device.type == "cuda"
    if not batched:
        out = []
        with torch.no_grad():
            for bag in bags:
                pi, mu, var = gmm_aggregate(torch.from_numpy(np.asarray(bag, dtype=np.float32)), prototypes,
                                            tau=tau, eps=eps, n_iter=n_iter)
                out.append(tokens(pi, mu, var).numpy())
        return np.stack(out)
    out, batch = [], []

    def flush():
        n_max = max(len(b) for b in batch)
        d = batch[0].shape[1]
        x = torch.zeros(len(batch), n_max, d, dtype=torch.float32)
        mask = torch.zeros(len(batch), n_max, dtype=torch.bool)
        for i, b in enumerate(batch):
            x[i, :len(b)] = torch.from_numpy(b)
            mask[i, :len(b)] = True
        with torch.no_grad():
            pi, mu, var = gmm_aggregate(x.to(device), torch.as_tensor(prototypes).to(device), tau=tau, eps=eps,
                                        n_iter=n_iter, mask=mask.to(device))
        out.append(tokens(pi, mu, var).cpu().numpy())
        batch.clear()

    for bag in bags:
        bag = np.asarray(bag, dtype=np.float32)
        if batch and (len(batch) + 1) * max(len(bag), *(len(b) for b in batch)) * bag.shape[1] > max_elements:
            flush()
        batch.append(bag)
    if batch:
        flush()
    return np.concatenate(out)
