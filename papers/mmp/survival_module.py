"""The LightningModule that trains every MMP survival model (folds × arms), and its sampler.

The official recipe (`scripts/survival/mmp.sh`): AdamW (no weight decay on 1-D parameters and
biases), a cosine schedule with a one-epoch linear warm-up, stepped after every batch,
    lr_t = lr · (t + 1)/W  for t < W (W = steps per epoch),   lr · ½(1 + cos(π (t − W)/(T − W)))  after,
the Cox loss over the batch (or the NLL discrete-hazard loss), the last epoch evaluated.
Shuffles come from (seed, epoch) (`LoopOrderSampler`), dropout from (seed, step) (shared.training
re-seeds before every step), so a fit here draws exactly what the hand-written loop it replaced drew.
"""
from __future__ import annotations

import math

import lightning as L
import torch

from shared.sampling import EpochSeededSampler
from shared.training import log_step

from .losses import cox_loss, nll_loss


def LoopOrderSampler(n: int, seed: int, **kwargs) -> EpochSeededSampler:  # noqa: N802 - reads as the sampler it returns
    """`EpochSeededSampler` on the permutation stream of MMP's former hand-written loop,
    derive_seed(seed, "epoch", epoch), so the port keeps its shuffles bit for bit."""
    return EpochSeededSampler(n, seed, stream="epoch", **kwargs)


def weight_decay_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """AdamW parameter groups: decay on matrices, none on 1-D parameters and biases."""
    decays = [p.ndim > 1 and not n.endswith("bias") for n, p in model.named_parameters()]
    params = [p for _, p in model.named_parameters()]
    return [{"params": [p for p, d in zip(params, decays) if d], "weight_decay": weight_decay},
            {"params": [p for p, d in zip(params, decays) if not d], "weight_decay": 0.0}]


def warmup_cosine(warm: int, total: int):
    """The lr factor of step t: linear warm-up over `warm` steps, then cosine to 0 at `total`."""

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, total - warm)))

    return factor


class SurvivalModule(L.LightningModule):
    """`model` trained with the Cox loss (`loss="cox"`, output η) or the NLL loss (hazard logits)."""

    def __init__(self, model: torch.nn.Module, *, loss: str, lr: float, weight_decay: float,
                 steps_per_epoch: int, epochs: int, alpha: float = 0.5):
        super().__init__()
        self.model, self.loss, self.lr, self.weight_decay, self.alpha = model, loss, lr, weight_decay, alpha
        self.steps_per_epoch, self.total_steps = steps_per_epoch, epochs * steps_per_epoch

    def training_step(self, batch, batch_idx):
        out = self.model(batch["inputs"])
        if self.loss == "cox":
            value = cox_loss(out[:, 0], batch["time"], batch["event"])
        else:
            value = nll_loss(out, batch["bin"], batch["event"], alpha=self.alpha)
        log_step(self, loss=value.detach())
        return value

    def configure_optimizers(self):
        opt = torch.optim.AdamW(weight_decay_groups(self.model, self.weight_decay), lr=self.lr, foreach=True)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(self.steps_per_epoch, self.total_steps))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
