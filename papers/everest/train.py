"""Pre-training (tube / EVEREST / ascending selection) and fine-tuning (full, top-60%, random-60%,
ascending, scratch): masks, frame pairs, parameter groups, the lr schedule and evaluation here; the
LightningModules in `modules.py` (imported only by a training, so the other experiments do not pay
for Lightning's import), trained through `shared.training`.

Batches are drawn with replacement, `batch` indices per step from a generator seeded from
(seed, purpose) (`shared.sampling.RandomBatchSampler`), the same for every arm; masks, frame pairs
and random pruning come from their own seeded generators, whose states go into every checkpoint
with the loss curve. `last.ckpt` is written every `trainer.every_n_train_steps` steps and at the
end, so a killed run resumes exactly (`shared.training.fit`, keyed by the config hash and seed).
Each training writes its loss curve to `<ckpt_dir>/logs/metrics.csv`.
"""
from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import nn

from shared.seeding import derive_seed

from .model import MaskedVideoAutoencoder, VideoClassifier
from .selection import (motion_scores, select_frame_pairs, select_tokens, tube_mask,
                        uniform_frame_pairs)

METHODS = ("tube", "everest", "ascending")
FRAME_SELECTORS = ("information", "uniform")


def make_masks(model: MaskedVideoAutoencoder, video: torch.Tensor, method: str, sel, generator=None):
    """Patch embeddings and the (visible, target) masks of one pre-training batch.

    tube: VideoMAE tube masking; everest: motion top-K + random split; ascending: the bottom-K
    (paper ablation). With `sel.match_visible`, EVEREST's V equals tube masking's V so only the
    choice of tokens differs between arms."""
    enc = model.encoder
    e = model.embed(video)
    b = video.shape[0]
    if method == "tube":
        vis, tgt = tube_mask(b, enc.slices, enc.positions, sel.mask_ratio, generator)
        return e, vis.to(video.device), tgt.to(video.device)
    if method not in METHODS:
        raise ValueError(f"method {method!r}; choose one of {METHODS}")
    v = tube_visible(enc.slices, enc.positions, sel.mask_ratio) if sel.match_visible else None
    scores = motion_scores(e).cpu()
    vis, tgt = select_tokens(scores, sel.rho_pre, sel.mask_ratio, generator, num_visible=v,
                             descending=method == "everest", per_slice=sel.per_slice)
    return e, vis.to(video.device), tgt.to(video.device)


def tube_visible(slices: int, positions: int, mask_ratio: float) -> int:
    from .selection import count

    return slices * (positions - count(mask_ratio, positions))


def param_groups(model: nn.Module, weight_decay: float, layer_decay: float | None = None, depth: int = 0):
    """No weight decay on biases, norms, mask token; optional layer-wise lr decay (fine-tuning)."""
    groups = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        no_wd = p.ndim == 1 or name.endswith("mask_token")
        layer = depth + 1
        if layer_decay is not None:
            if name.startswith("encoder.embed"):
                layer = 0
            elif name.startswith("encoder.blocks."):
                layer = int(name.split(".")[2]) + 1
        scale = 1.0 if layer_decay is None else layer_decay ** (depth + 1 - layer)
        key = (no_wd, scale)
        groups.setdefault(key, {"params": [], "weight_decay": 0.0 if no_wd else weight_decay, "lr_scale": scale})
        groups[key]["params"].append(p)
    return list(groups.values())


def lr_at(step: int, steps: int, lr: float, min_lr: float, warmup: int) -> float:
    if step < warmup:
        return lr * (step + 1) / warmup
    t = (step - warmup) / max(1, steps - warmup)
    return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * t))


def set_lr(opt, lr: float) -> None:
    """Each group at `lr` times its layer-decay scale."""
    for g in opt.param_groups:
        g["lr"] = lr * g["lr_scale"]


def choose_pairs(model: MaskedVideoAutoencoder, clips: torch.Tensor, frames: str, rho_pre: float,
                 generator: torch.Generator) -> torch.Tensor:
    """The τ frame pairs [b, τ] of candidate clips [b, C, 2·α·τ, H, W]: `information` (frame
    selection with the current embedding) or `uniform` (the ablation)."""
    pairs = model.encoder.slices
    if frames == "information":
        with torch.no_grad():
            scores = motion_scores(model.embed(clips)).cpu()            # [b, α·τ, L]
        return torch.stack([select_frame_pairs(s, pairs, rho_pre, generator) for s in scores])
    if frames == "uniform":
        return torch.stack([uniform_frame_pairs(clips.shape[2] // 2, pairs, generator) for _ in range(len(clips))])
    raise ValueError(f"frames={frames!r}; choose one of {FRAME_SELECTORS}")


def pretrain(model: MaskedVideoAutoencoder, data, method: str, cfg, seed: int,
             ckpt_dir: Path, snapshots: dict[int, str] | None = None, device: str = "cpu",
             frames: str | None = None) -> list[float]:
    """Pre-train on `data` (len() and batch(idx) -> (video [b, C, F, H, W], labels)); writes
    ckpt_dir/<name>.pt weights at each snapshot step. Returns the loss of every step.

    The batch order (seed, "batches") is the same for every method; masks come from (seed, "masks").
    With `frames` ("information" or "uniform"), `data` holds candidate clips of 2·α·τ frames and each
    clip's τ frame pairs are drawn by `choose_pairs` (generator (seed, "frames"))."""
    from .modules import PretrainModule, Snapshots, batches, train

    p = cfg.pretrain
    module = PretrainModule(model, method, cfg, seed, frames)
    snap = Snapshots(ckpt_dir, snapshots or {})
    return train(module, batches(data, p.batch, p.steps, derive_seed(seed, "batches")), cfg, seed, ckpt_dir,
                 device, [snap])


def finetune(model: VideoClassifier, data, cfg, seed: int,
             ckpt_dir: Path, device: str = "cpu") -> list[float]:
    """Supervised fine-tuning with label smoothing and layer-wise lr decay; same batches every arm."""
    from .modules import FinetuneModule, batches, train

    f = cfg.finetune
    module = FinetuneModule(model, cfg, seed)
    return train(module, batches(data, f.batch, f.steps, derive_seed(seed, "ft-batches")), cfg, seed, ckpt_dir,
                 device)


@torch.no_grad()
def evaluate(model: VideoClassifier, data, batch: int, seed: int, device: str = "cpu") -> float:
    """Top-1 accuracy (%) with the arm's own token pruning at test time. A batch of multi-view
    clips [b, views, C, F, H, W] is scored by the mean softmax over its views."""
    model.to(device).eval()
    gen = torch.Generator().manual_seed(derive_seed(seed, "eval-prune"))
    correct = 0
    for i in range(0, len(data), batch):
        video, labels = data.batch(torch.arange(i, min(i + batch, len(data))))
        if video.dim() == 6:
            b, v = video.shape[:2]
            probs = model(video.flatten(0, 1).to(device), gen).softmax(-1).view(b, v, -1).mean(1)
        else:
            probs = model(video.to(device), gen)
        correct += int((probs.argmax(-1).cpu() == labels).sum())
    return 100.0 * correct / len(data)
