"""Pure-torch reference of one PANTHER EM step on padded, masked bags (brief mmp §1, §4a).

E-step:  log p_nc = -1/2 [d log 2π + Σ_j log Σ_cj + Σ_j (x_nj - μ_cj)² / Σ_cj] + log π_c
         q_nc = softmax_c(log p_nc), q = 0 on padded rows
MAP M-step (prior at the prototypes m_c with weight τ, variance ε):
         W_c = Σ_n q_nc + τ,  π_c = W_c / Σ_c' W_c'
         μ_c = (Σ_n q_nc x_n + τ m_c) / W_c
         Σ_c = (Σ_n q_nc x_n² + τ (ε + m_c²)) / W_c - μ_c²
"""
from __future__ import annotations

import math

import torch


def gmm_estep(x: torch.Tensor, mask: torch.Tensor | None, pi: torch.Tensor, mu: torch.Tensor, var: torch.Tensor,
              prototypes: torch.Tensor, tau: float, eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x [B,N,d], mask [B,N] (True = real patch) or None, pi [B,C], mu/var [B,C,d], prototypes [C,d].

    Returns the updated (pi [B,C], mu [B,C,d], var [B,C,d]) in x's dtype (float32 accumulation at least).
    """
    dtype = x.dtype
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    x, pi, mu, var, m = (t.to(acc) for t in (x, pi, mu, var, prototypes))
    d = x.shape[-1]
    inv = 1.0 / var                                                          # [B,C,d]
    quad = (x * x) @ inv.transpose(1, 2) - 2 * x @ (mu * inv).transpose(1, 2) + (mu * mu * inv).sum(-1)[:, None, :]
    logp = -0.5 * (d * math.log(2 * math.pi) + torch.log(var).sum(-1)[:, None, :] + quad) + torch.log(pi)[:, None, :]
    q = torch.softmax(logp, dim=-1)                                          # [B,N,C]
    if mask is not None:
        q = q * mask.to(acc)[..., None]
    w = q.sum(1) + tau                                                       # [B,C]
    new_pi = w / w.sum(-1, keepdim=True)
    new_mu = (q.transpose(1, 2) @ x + tau * m) / w[..., None]
    new_var = (q.transpose(1, 2) @ (x * x) + tau * (eps + m * m)) / w[..., None] - new_mu ** 2
    return new_pi.to(dtype), new_mu.to(dtype), new_var.to(dtype)
