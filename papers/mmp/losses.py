"""Survival losses: Cox partial likelihood over a batch, and the NLL discrete-hazard loss.

Cox (no tie handling; a batch without events gives 0):
    ℓ = -Σ_{i: event} (η_i - log Σ_{j: t_j ≥ t_i} e^{η_j}) / n_events
NLL (Zadeh & Schmid; hazards h = σ(logits) over bins, S_k = Π_{j≤k} (1 - h_j), S_{-1} = 1):
    U = log S_{y-1} + log h_y
    L = (1 - α)[-c log S_y - (1 - c) U] - α (1 - c) U        (c = 1 for censored)
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


def cox_loss(log_risk, time, event) -> torch.Tensor:
    """Mean negative log partial likelihood over the events of a batch (0 with no events).

    log_risk: [B] predicted η; time: [B]; event: [B] bool, True where the event was observed.
    """
    eta = torch.as_tensor(log_risk).reshape(-1)
    t = torch.as_tensor(time, device=eta.device).reshape(-1)
    e = torch.as_tensor(event, device=eta.device).reshape(-1).bool()
    if not bool(e.any()):
        return eta.sum() * 0.0
    at_risk = t[None, :] >= t[:, None]                                   # [i, j]: t_j >= t_i
    log_denominator = torch.logsumexp(eta[None, :].masked_fill(~at_risk, float("-inf")), dim=1)
    return -(eta - log_denominator)[e].sum() / e.sum()


def nll_bins(time, event, n_bins: int = 4) -> np.ndarray:
    """Bin edges at quantiles of the uncensored times (first edge 0, last edge +inf)."""
    t_event = np.asarray(time)[np.asarray(event, dtype=bool)]
    edges = np.quantile(t_event, np.linspace(0, 1, n_bins + 1))
    edges[0], edges[-1] = 0.0, np.inf
    return edges


def to_bins(time, edges) -> np.ndarray:
    """Bin index y of each time (0..n_bins-1)."""
    return np.clip(np.searchsorted(edges, np.asarray(time), side="right") - 1, 0, len(edges) - 2)


def nll_loss(logits, y, event, alpha: float = 0.5) -> torch.Tensor:
    """Discrete-hazard negative log-likelihood; logits [B, K], y [B] bin index, event [B] bool."""
    y = torch.as_tensor(y, device=logits.device).long().reshape(-1, 1)
    c = (~torch.as_tensor(event, device=logits.device).bool()).to(logits.dtype).reshape(-1, 1)
    log_h = F.logsigmoid(logits)
    log_1mh = F.logsigmoid(-logits)
    log_s = torch.cumsum(log_1mh, dim=1)
    log_s_pad = torch.cat([torch.zeros_like(log_s[:, :1]), log_s], dim=1)   # S_{-1} = 1
    log_s_prev = log_s_pad.gather(1, y)
    log_h_y = log_h.gather(1, y)
    log_s_y = log_s_pad.gather(1, y + 1)
    u = log_s_prev + log_h_y
    loss = (1 - alpha) * (-c * log_s_y - (1 - c) * u) - alpha * (1 - c) * u
    return loss.mean()


def nll_risk(logits) -> torch.Tensor:
    """Risk score -Σ_k S_k for the NLL head."""
    return -torch.exp(torch.cumsum(F.logsigmoid(-logits), dim=1)).sum(1)
