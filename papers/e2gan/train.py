"""Paired GAN training (pix2pix objective) with PSNR-to-teacher tracking and FLOP counting.

    L_D = ½[(D(x, y) − 1)² + D(x, G(x, c))²]          (LSGAN)
    L_G = (D(x, G(x, c)) − 1)² + λ‖y − G(x, c)‖₁,  λ = 100

Adam(lr, β = (0.5, 0.999)) on G's *trainable* parameters (all of them, or only the adapters) and
on D. Training FLOPs per step are counted once with `torch.utils.flop_counter.FlopCounterMode`
(G and D, forward and backward; frozen weights get no weight-gradient FLOPs) and multiplied by the
step count. The loop is `gan_module.GanModule` (Lightning, manual optimisation) trained through
`shared.training`; most fits are throw-away (no checkpoint files, a scratch folder), as the
experiments run well over a hundred short trainings (arms × concepts × seeds, rank-search probes,
data sizes). It gives bit for bit the weights of the former hand-written loop (same draws, same order).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from shared.sampling import RandomBatchSampler, random_batches

from .data import to_images
from .metrics import psnr

LOG_EVERY = 10   # CSV rows: the losses of every 10th iteration (every steps//2-th in a shorter fit)


def log_interval(steps: int) -> int:
    """Log every `LOG_EVERY` steps, or often enough that a short fit (smoke) still logs two rows."""
    return max(1, min(LOG_EVERY, steps // 2))


@dataclass
class Pairs:
    """x, y: (N, 3, H, W) in [-1, 1]; text tokens and masks per sample (from a small prompt bank)."""

    x: torch.Tensor
    y: torch.Tensor
    tokens: torch.Tensor  # (P, T, D) prompt bank
    masks: torch.Tensor   # (P, T)
    prompt_index: torch.Tensor  # (N,)

    def __len__(self):
        return len(self.x)

    def batch(self, idx):
        p = self.prompt_index[idx]
        return self.x[idx], self.y[idx], self.tokens[p], self.masks[p]

    def subset(self, idx) -> "Pairs":
        idx = torch.as_tensor(idx)
        return Pairs(self.x[idx], self.y[idx], self.tokens, self.masks, self.prompt_index[idx])

    @staticmethod
    def concat(parts: list["Pairs"]) -> "Pairs":
        tokens = torch.cat([p.tokens for p in parts])
        masks = torch.cat([p.masks for p in parts])
        offsets = np.cumsum([0] + [len(p.tokens) for p in parts[:-1]])
        return Pairs(torch.cat([p.x for p in parts]), torch.cat([p.y for p in parts]), tokens, masks,
                     torch.cat([p.prompt_index + int(o) for p, o in zip(parts, offsets)]))


@torch.no_grad()
def predict(G: nn.Module, pairs: Pairs, chunk: int = 64) -> np.ndarray:
    out = []
    for s in range(0, len(pairs), chunk):
        x, _, t, m = pairs.batch(torch.arange(s, min(s + chunk, len(pairs))))
        out.append(to_images(G(x, t, m)))
    return np.concatenate(out)


def eval_psnr(G: nn.Module, pairs: Pairs) -> float:
    return psnr(predict(G, pairs), to_images(pairs.y))


def trainable_params(G: nn.Module) -> int:
    return sum(p.numel() for p in G.parameters() if p.requires_grad)


def batch_digest(n: int, batch: int, steps: int, seed: int) -> str:
    """A hash of the first `steps` minibatches `RandomBatchSampler(n, batch, steps, seed)` draws (the
    same seed and data size give the same order, whatever the model: common random numbers)."""
    digest = hashlib.sha256()
    for idx in RandomBatchSampler(n, batch, steps, seed, num_replicas=1, rank=0):
        digest.update(torch.tensor(idx, dtype=torch.long).numpy().tobytes())
    return digest.hexdigest()[:16]


def determinism_mode(device: torch.device | str, accelerator: str | None = None) -> bool | str:
    """The determinism a fit runs under: Lightning's strict `deterministic=True` on the CPU; "warn" on
    CUDA, where `nn.ReflectionPad2d` (every generator's padding) has no deterministic backward and strict
    mode raises at the first training step. Warn-only keeps every deterministic kernel (cuDNN, cuBLAS
    workspace) and reports the padding's backward instead of stopping."""
    cuda = torch.device(device).type == "cuda" or str(accelerator or "").lower() in ("gpu", "cuda")
    return "warn" if cuda else True


def apply_determinism(mode: bool | str) -> None:
    """Set torch's deterministic-algorithms mode to `mode` (after the trainer is built: Lightning's
    `Trainer(deterministic=True)` turns strict mode on in its constructor, over `seed_everything`'s warn-only)."""
    torch.use_deterministic_algorithms(bool(mode), warn_only=mode == "warn")


def train_gan(G: nn.Module, D: nn.Module, train: Pairs, steps: int, *, seed: int, lr: float = 2e-4,
              lr_d: float = 2e-4, beta1: float = 0.5, batch_size: int = 8, lambda_l1: float = 100.0,
              test: Pairs | None = None, eval_every: int = 0, patience: int = 0, min_delta: float = 0.0,
              stop_at: float | None = None, out_dir: str | Path | None = None,
              cache_config: dict | None = None, options: dict | None = None) -> dict:
    """Train G (its trainable parameters) and D through `shared.training` (`GanModule`); return the
    PSNR curve, the FLOPs per step and the loss curve.

    Minibatches: `batch_size` pairs a step drawn with replacement from a generator seeded with `seed`.
    With `patience` > 0 training stops early once `patience` evaluations in a row fail to beat the best
    PSNR so far by `min_delta` dB (a plateau); with `stop_at` it stops at the first evaluation whose PSNR
    reaches that value. out_dir: a checkpointed fit (`checkpoints/last.ckpt` at the end and every
    `trainer.every_n_train_steps` steps, resumed when its key, the hash of `cache_config` and `seed`,
    matches); None: a throw-away folder, no checkpoint files (most fits here last seconds).
    options: `make_trainer` keywords (None: the running experiment's `trainer:` / `logging:`).
    """
    from shared.training import fit, fit_folder, make_trainer

    from .gan_module import GanModule

    device = next(G.parameters()).device
    batch = min(batch_size, len(train))
    log_every = log_interval(steps)
    module = GanModule(G, D, lr=lr, lr_d=lr_d, beta1=beta1, lambda_l1=lambda_l1, max_steps=steps,
                       evaluate=(lambda g: eval_psnr(g, test)) if test is not None else None,
                       eval_every=eval_every, patience=patience, min_delta=min_delta, stop_at=stop_at,
                       log_every=log_every)
    options = dict(options or {})
    options.setdefault("accelerator", "gpu" if device.type == "cuda" else "cpu")
    with fit_folder(out_dir, options, prefix="e2gan_fit_") as root:
        trainer = make_trainer(root, seed=seed, max_steps=steps, max_epochs=1, progress=False,
                               log_every_n_steps=log_every, cache_config=cache_config,
                               checkpoint=out_dir is not None, **options)
        apply_determinism(determinism_mode(device, options.get("accelerator")))
        fit(trainer, module, random_batches(train, batch, steps, seed))
        losses = read_losses(root / "logs" / "metrics.csv")
    G.to(device)   # Lightning's teardown moves a GPU module back to the CPU
    D.to(device)
    done = int(trainer.global_step)
    return {"steps": done, "max_steps": steps, "flops_per_step": module.flops_per_step,
            "curve": module.curve, "seconds": module.seconds, "trainable_params": trainable_params(G),
            "batch_digest": batch_digest(len(train), batch, done, seed), "losses": losses}


def read_losses(path: Path, columns: tuple[str, ...] = ("loss_g", "loss_d")) -> list[dict]:
    """The (step, *columns) rows of a fit's CSV log (Lightning's `step` is 0-based: the row at step s
    holds the (s+1)-th iteration's values); [] when nothing was logged."""
    import pandas as pd

    if not path.is_file():
        return []
    df = pd.read_csv(path)
    return [{"step": int(row[0]) + 1, **{c: float(v) for c, v in zip(columns, row[1:])}}
            for row in df[["step", *columns]].itertuples(index=False)]


def to_target(history: dict, target: float) -> dict:
    """Steps, seconds and FLOPs to reach `target` PSNR, interpolated linearly between the last evaluation
    below it and the first at or above it (so arms evaluated at different intervals compare fairly).
    Reaching it already at step 0 is charged the first evaluation interval (training must start); an arm
    that never reaches it is charged every step it ran (`reached` False: a lower bound on its cost)."""
    curve, secs = history["curve"], history["seconds"]
    for i, ((step, value), sec) in enumerate(zip(curve, secs)):
        if value < target:
            continue
        if i == 0 or step == 0:
            step, sec = (curve[1][0], secs[1]) if step == 0 and len(curve) > 1 else (step, sec)
        else:
            (s0, v0), t0 = curve[i - 1], secs[i - 1]
            w = (target - v0) / (value - v0)
            step, sec = s0 + w * (step - s0), t0 + w * (sec - t0)
        return {"reached": True, "steps": float(step), "seconds": float(sec), "flops": step * history["flops_per_step"]}
    steps = history["steps"]
    return {"reached": False, "steps": float(steps), "seconds": secs[-1] if secs else 0.0,
            "flops": steps * history["flops_per_step"]}
