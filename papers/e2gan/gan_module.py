"""The paired GAN as a LightningModule (manual optimisation: one D step, then one G step, per batch).

    L_D = ½[(D(x, y) − 1)² + D(x, G(x, c))²]          (LSGAN)
    L_G = (D(x, G(x, c)) − 1)² + λ‖y − G(x, c)‖₁,  λ = 100

Adam(lr, β = (0.5, 0.999)) on G's trainable parameters and on D. D's optimiser is stepped unwrapped,
so Lightning's `global_step` counts GAN iterations (one per batch), as `max_steps`, the step
checkpoints and the step re-seed expect. The FLOPs of one iteration are counted at the first batch
(`FlopCounterMode`: G and D, forward and backward). With a test set, the test PSNR is evaluated every
`eval_every` iterations and training stops at a plateau (`patience`) or at `stop_at`. The curve, the
training seconds, the plateau state and the FLOP count go into every checkpoint, so a resumed run
ends as an uninterrupted one. The losses of every `log_every`-th iteration go to the loggers.
"""
from __future__ import annotations

import time

import lightning as L
import numpy as np
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode


def d_loss(D: nn.Module, x, y, fake) -> torch.Tensor:
    """LSGAN discriminator loss on the real pair (x, y) and the detached fake."""
    return 0.5 * ((D(x, y) - 1).pow(2).mean() + D(x, fake.detach()).pow(2).mean())


def g_loss(D: nn.Module, x, y, fake, lambda_l1: float) -> torch.Tensor:
    """LSGAN generator loss plus λ·L1 to the teacher's output."""
    return (D(x, fake) - 1).pow(2).mean() + lambda_l1 * (fake - y).abs().mean()


def count_step_flops(G: nn.Module, D: nn.Module, batch, lambda_l1: float = 100.0) -> int:
    """FLOPs of one GAN iteration as `GanModule` counts them (G and D, forward and backward, D's step
    before G's; frozen weights get no weight gradients), without training: the gradients are dropped."""
    x, y, t, m = batch
    with FlopCounterMode(display=False) as counter:
        fake = G(x, t, m)
        d_loss(D, x, y, fake).backward()
        D.requires_grad_(False)
        g_loss(D, x, y, fake, lambda_l1).backward()
        D.requires_grad_(True)
    G.zero_grad(set_to_none=True)
    D.zero_grad(set_to_none=True)
    return int(counter.get_total_flops())


class GanModule(L.LightningModule):
    def __init__(self, G: nn.Module, D: nn.Module, *, lr: float, lr_d: float, beta1: float, lambda_l1: float,
                 max_steps: int, evaluate=None, eval_every: int = 0, patience: int = 0, min_delta: float = 0.0,
                 stop_at: float | None = None, log_every: int = 10):
        super().__init__()
        self.automatic_optimization = False
        self.G, self.D = G, D
        self.lr, self.lr_d, self.beta1, self.lambda_l1 = lr, lr_d, beta1, lambda_l1
        self.max_steps, self.evaluate, self.eval_every = max_steps, evaluate, eval_every
        self.patience, self.min_delta, self.stop_at = patience, min_delta, stop_at
        self.log_every = log_every
        self.curve: list[tuple[int, float]] = []
        self.seconds: list[float] = []
        self.elapsed, self.best, self.stale, self.flops_per_step = 0.0, -np.inf, 0, 0
        self._t0 = 0.0

    def configure_optimizers(self):
        # foreach: one fused update over all tensors (CPU too); bitwise the per-tensor loop's, ~18% faster here
        g_params = [p for p in self.G.parameters() if p.requires_grad]
        return [torch.optim.Adam(g_params, lr=self.lr, betas=(self.beta1, 0.999), foreach=True),
                torch.optim.Adam(self.D.parameters(), lr=self.lr_d, betas=(self.beta1, 0.999), foreach=True)]

    def _evaluating(self) -> bool:
        return self.evaluate is not None and bool(self.eval_every)

    def on_train_start(self) -> None:
        if self._evaluating() and not self.curve:   # a fresh run: the PSNR before training
            self.curve.append((0, float(self.evaluate(self.G))))
            self.seconds.append(0.0)

    def on_train_batch_start(self, batch, batch_idx) -> None:
        self._t0 = time.perf_counter()

    def training_step(self, batch, batch_idx):
        x, y, t, m = batch
        opt_g, opt_d = self.optimizers()
        counter = FlopCounterMode(display=False) if self.global_step == 0 else None
        if counter is not None:
            counter.__enter__()
        fake = self.G(x, t, m)
        loss_d = d_loss(self.D, x, y, fake)
        opt_d.optimizer.zero_grad(set_to_none=True)
        self.manual_backward(loss_d)
        opt_d.optimizer.step()   # unwrapped: only G's step advances global_step
        self.D.requires_grad_(False)   # G step: no weight gradients for D
        loss_g = g_loss(self.D, x, y, fake, self.lambda_l1)
        opt_g.zero_grad(set_to_none=True)
        self.manual_backward(loss_g)
        opt_g.step()
        self.D.requires_grad_(True)
        if counter is not None:
            counter.__exit__(None, None, None)
            self.flops_per_step = int(counter.get_total_flops())
        if self.global_step % self.log_every == 0:   # after G's step: global_step = this iteration's number; `log` costs ~1 ms a call
            self.log_dict({"loss_g": loss_g.detach(), "loss_d": loss_d.detach()}, on_step=True, on_epoch=False)

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        self.elapsed += time.perf_counter() - self._t0
        step = self.global_step
        if not self._evaluating() or (step % self.eval_every and step != self.max_steps):
            return
        value = float(self.evaluate(self.G))
        self.curve.append((step, value))
        self.seconds.append(self.elapsed)
        if self.stop_at is not None and value >= self.stop_at:
            self.trainer.should_stop = True
            return
        if value > self.best + self.min_delta:
            self.best, self.stale = value, 0
        else:
            self.stale += 1
        if self.patience and self.stale >= self.patience:
            self.trainer.should_stop = True

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["e2gan"] = {"curve": [list(c) for c in self.curve], "seconds": list(self.seconds),
                               "elapsed": self.elapsed, "best": float(self.best), "stale": self.stale,
                               "flops_per_step": self.flops_per_step}

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        s = checkpoint["e2gan"]
        self.curve = [(int(a), float(b)) for a, b in s["curve"]]
        self.seconds = [float(v) for v in s["seconds"]]
        self.elapsed, self.best, self.stale = float(s["elapsed"]), float(s["best"]), int(s["stale"])
        self.flops_per_step = int(s["flops_per_step"])
