"""Seeded plain-torch training loops for pre-training (tube / EVEREST / ascending selection) and
fine-tuning (full, top-60%, random-60%, ascending, scratch).

A plain loop rather than Lightning: the tiny profile runs 42 short trainings (14 arms × 3 seeds), where
Lightning's import and per-run overhead (10-20 s each on this box) would rival the training itself.
Resume is exact: `last.pt` holds weights, optimiser, scheduler and the RNG streams, saved every
`ckpt_every` steps; batches and masks are drawn from generators seeded from (seed, purpose).
"""
from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import nn

from shared.seeding import derive_seed

from .model import MaskedVideoAutoencoder, VideoClassifier
from .selection import (motion_scores, pair_frames, select_frame_pairs, select_tokens, tube_mask,
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


def _set_lr(opt, lr: float) -> None:
    for g in opt.param_groups:
        g["lr"] = lr * g["lr_scale"]


def _config_key(cfg) -> str:
    """A checkpoint is resumed only by a run of the same config (a changed config starts afresh)."""
    from shared.config import config_hash

    return config_hash(cfg)


def _resume(path: Path, model, opt, gens: dict, key: str) -> int:
    if not path.exists():
        return 0
    state = torch.load(path, map_location="cpu", weights_only=True)
    if state.get("config") != key:
        return 0
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    for k, g in gens.items():
        g.set_state(state["rng"][k])
    return int(state["step"])


def _save(path: Path, model, opt, gens: dict, step: int, key: str) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "config": key,
                "rng": {k: g.get_state() for k, g in gens.items()}}, tmp)
    tmp.replace(path)


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
    ckpt_dir/<name>.pt weights at each snapshot step.

    The batch order (seed, "batches") is the same for every method; masks come from (seed, "masks").
    With `frames` ("information" or "uniform"), `data` holds candidate clips of 2·α·τ frames and each
    clip's τ frame pairs are drawn by `choose_pairs` (generator (seed, "frames"))."""
    p = cfg.pretrain
    model.to(device).train()
    opt = torch.optim.AdamW(param_groups(model, p.weight_decay), lr=p.lr, betas=tuple(p.betas))
    gens = {"batches": torch.Generator().manual_seed(derive_seed(seed, "batches")),
            "masks": torch.Generator().manual_seed(derive_seed(seed, "masks")),
            "frames": torch.Generator().manual_seed(derive_seed(seed, "frames"))}
    last = ckpt_dir / "last.pt"
    start = _resume(last, model, opt, gens, _config_key(cfg))
    losses = [float(x) for x in (torch.load(ckpt_dir / "losses.pt", weights_only=True).tolist() if start else [])]
    snapshots = snapshots or {}
    warmup = int(p.warmup_frac * p.steps)
    for step in range(start, p.steps):
        _set_lr(opt, lr_at(step, p.steps, p.lr, p.min_lr, warmup))
        idx = torch.randint(len(data), (p.batch,), generator=gens["batches"])
        clip = data.batch(idx)[0].to(device)
        if frames is not None:
            chosen = choose_pairs(model, clip, frames, cfg.selection.rho_pre, gens["frames"])
            clip = torch.stack([pair_frames(c, pairs) for c, pairs in zip(clip, chosen)])
        e, vis, tgt = make_masks(model, clip, method, cfg.selection, gens["masks"])
        loss = model(clip, vis, tgt, embeddings=e)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        done = step + 1
        if done in snapshots:
            torch.save(model.state_dict(), ckpt_dir / f"{snapshots[done]}.pt")
        if done % p.ckpt_every == 0 or done == p.steps:
            torch.save(torch.tensor(losses), ckpt_dir / "losses.pt")
            _save(last, model, opt, gens, done, _config_key(cfg))
    return losses


def finetune(model: VideoClassifier, data, cfg, seed: int,
             ckpt_dir: Path, device: str = "cpu") -> list[float]:
    """Supervised fine-tuning with label smoothing and layer-wise lr decay; same batches every arm."""
    f = cfg.finetune
    model.to(device).train()
    depth = len(model.encoder.blocks)
    opt = torch.optim.AdamW(param_groups(model, f.weight_decay, f.layer_decay, depth), lr=f.lr, betas=(0.9, 0.999))
    gens = {"batches": torch.Generator().manual_seed(derive_seed(seed, "ft-batches")),
            "prune": torch.Generator().manual_seed(derive_seed(seed, "ft-prune"))}
    last = ckpt_dir / "last.pt"
    start = _resume(last, model, opt, gens, _config_key(cfg))
    losses = [float(x) for x in (torch.load(ckpt_dir / "losses.pt", weights_only=True).tolist() if start else [])]
    crit = nn.CrossEntropyLoss(label_smoothing=f.label_smoothing)
    warmup = int(f.warmup_frac * f.steps)
    for step in range(start, f.steps):
        _set_lr(opt, lr_at(step, f.steps, f.lr, f.min_lr, warmup))
        idx = torch.randint(len(data), (f.batch,), generator=gens["batches"])
        video, labels = data.batch(idx)
        loss = crit(model(video.to(device), gens["prune"]), labels.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        done = step + 1
        if done % f.ckpt_every == 0 or done == f.steps:
            torch.save(torch.tensor(losses), ckpt_dir / "losses.pt")
            _save(last, model, opt, gens, done, _config_key(cfg))
    return losses


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
