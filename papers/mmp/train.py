"""A plain, seeded torch training loop for the many small survival models (folds × arms).

Lightning's per-fit overhead dominates fits of a few seconds, so these use a loop that mirrors
the official recipe: AdamW (no weight decay on 1-D parameters and biases), a cosine schedule
with a one-epoch linear warm-up, the last epoch evaluated (no validation set, no early stopping).
Shuffling is seeded from (seed, epoch), dropout from (seed, step).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from shared.seeding import derive_seed

from .losses import cox_loss, nll_bins, nll_loss, nll_risk, to_bins


def make_batch(data: dict, idx) -> dict:
    """Select patients `idx` from {"hist": tensor, "genes": tensor, "bags": list} (keys optional)."""
    idx = np.asarray(idx)
    batch = {}
    for key, value in data.items():
        if isinstance(value, list):
            batch[key] = [value[i] for i in idx]
        else:
            batch[key] = value[torch.as_tensor(idx)]
    return batch


def _optimizer(model, lr: float, weight_decay: float):
    decay = [p for n, p in model.named_parameters() if p.ndim > 1 and not n.endswith("bias")]
    no_decay = [p for n, p in model.named_parameters() if not (p.ndim > 1 and not n.endswith("bias"))]
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}], lr=lr)


def train_survival(model, data: dict, time, event, *, loss: str, epochs: int, batch_size: int, lr: float,
                   weight_decay: float, seed: int, n_bins: int = 4, alpha: float = 0.5) -> dict:
    """Train `model` on all patients of `data` with the Cox (batch) or NLL loss; returns the
    fitted state needed to predict (NLL bin edges)."""
    time, event = np.asarray(time, dtype=float), np.asarray(event, dtype=bool)
    n = len(time)
    edges = nll_bins(time, event, n_bins) if loss == "nll" else None
    y_bin = to_bins(time, edges) if loss == "nll" else None
    opt = _optimizer(model, lr, weight_decay)
    steps_per_epoch = math.ceil(n / batch_size)
    total, warm = epochs * steps_per_epoch, steps_per_epoch

    def lr_factor(step):
        if step < warm:
            return (step + 1) / warm
        return 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, total - warm)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor)
    step = 0
    model.train()
    for epoch in range(epochs):
        order = torch.randperm(n, generator=torch.Generator().manual_seed(derive_seed(seed, "epoch", epoch))).numpy()
        for start in range(0, n, batch_size):
            idx = order[start:start + batch_size]
            torch.manual_seed(derive_seed(seed, "step", step))
            out = model(make_batch(data, idx))
            if loss == "cox":
                value = cox_loss(out[:, 0], torch.as_tensor(time[idx]), torch.as_tensor(event[idx]))
            else:
                value = nll_loss(out, y_bin[idx], torch.as_tensor(event[idx]), alpha=alpha)
            opt.zero_grad()
            value.backward()
            opt.step()
            sched.step()
            step += 1
    model.eval()
    return {"loss": loss, "edges": edges}


@torch.no_grad()
def predict_risk(model, data: dict, idx, state: dict, chunk: int = 64) -> np.ndarray:
    """Risk scores (higher = earlier event): η for Cox, -Σ_k S_k for NLL."""
    model.eval()
    idx = np.asarray(idx)
    out = []
    for start in range(0, len(idx), chunk):
        o = model(make_batch(data, idx[start:start + chunk]))
        out.append(o[:, 0] if state["loss"] == "cox" else nll_risk(o))
    return torch.cat(out).double().numpy()
