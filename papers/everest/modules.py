"""The two training phases as LightningModules, trained through `shared.training`.

Batches: `batch` indices per step drawn with replacement from a generator seeded from (seed,
purpose) (`shared.sampling.RandomBatchSampler`), the same for every arm. Masks, frame pairs and
random pruning come from their own seeded generators, whose states go into every checkpoint with
the loss curve, so a run killed after any step checkpoint resumes to the same weights and losses.
"""
from __future__ import annotations

import os
from pathlib import Path

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader

from shared.config import config_hash
from shared.sampling import IndexBatches, RandomBatchSampler, world
from shared.seeding import derive_seed
from shared.training import fit, make_trainer, trainer_options

from .model import MaskedVideoAutoencoder, VideoClassifier
from .selection import pair_frames
from .recipe import choose_pairs, lr_at, make_masks, param_groups, set_lr


class DrawBatchSampler(RandomBatchSampler):
    """`RandomBatchSampler`'s batches (the same indices, the same share per DDP rank), each index paired
    with its draw: its place step·batch + j in the epoch's sequence of global batches. A dataset that
    keys its augmentation by the draw (`VideoListDataset.batch(idx, draws)`) gives two draws of one
    video two windows, crops and flips, the same in every run, on every rank count and worker count."""

    def __iter__(self):
        w, r = world(self.num_replicas, self.rank)
        skip = self._skip[1] if self._skip is not None and self._skip[0] == self.epoch else 0
        for k, idx in enumerate(super().__iter__()):
            step = skip + k
            yield list(zip(range(step * self.batch + r, (step + 1) * self.batch, w), idx))


class DrawBatches(IndexBatches):
    """`data.batch(idx, draws)` for a `DrawBatchSampler`'s batch (or `data.batch(idx)` for data whose
    clips are fixed, the procedural ones)."""

    def __getitems__(self, pairs):
        draws, idx = zip(*pairs)
        idx = torch.tensor(idx, dtype=torch.long)
        if getattr(self.data, "keyed_by_draw", False):
            return self.data.batch(idx, draws)
        return self.data.batch(idx)


def _as_is(batch):
    return batch


def loader_workers(requested: int) -> int:
    """DataLoader workers: `requested`, or for -1 the CPUs this process may run on (under SLURM the
    rule's cpus_per_task) less one for the training process. Each worker runs one torch thread."""
    if requested >= 0:
        return requested
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(0, cpus - 1)


def batches(data, batch: int, steps: int, seed: int, workers: int = 0) -> DataLoader:
    """`steps` batches of `batch` clips drawn with replacement (generator seeded with `seed`, as
    `shared.sampling.random_batches`); under DDP each process takes its share of every batch. Video
    clips are decoded in `loader_workers(workers)` processes; the batches do not depend on how many."""
    n = loader_workers(workers)
    return DataLoader(DrawBatches(data), batch_sampler=DrawBatchSampler(len(data), batch, steps, seed),
                      collate_fn=_as_is, num_workers=n, persistent_workers=False)


class _Phase(L.LightningModule):
    """Shared by both phases: the cosine lr set before each step, the loss curve, and the seeded
    generators, all saved in (and restored from) the checkpoint."""

    def __init__(self, phase, gens: dict[str, torch.Generator], seed: int = 0):
        super().__init__()
        self.phase, self.gens, self.losses, self.seed = phase, gens, [], seed
        self.warmup = int(phase.warmup_frac * phase.steps)

    def _rank_generators(self) -> None:
        """Under DDP each rank draws its own masks, frame pairs and pruning: rank 0 from the checkpointed
        streams (so a one-process run is unchanged), rank r > 0 from generators seeded every step from
        (seed, stream, rank, step), which a resumed run reproduces without saving their state."""
        rank = self.global_rank
        if rank:
            for name, g in self.gens.items():
                g.manual_seed(derive_seed(self.seed, name, "rank", rank, self.global_step))

    def _lr_step(self) -> None:
        self._rank_generators()
        set_lr(self.optimizers().optimizer, lr_at(self.global_step, self.phase.steps, self.phase.lr,
                                                   self.phase.min_lr, self.warmup))

    def _record(self, loss: torch.Tensor) -> torch.Tensor:
        self.losses.append(float(loss.detach()))
        self.log("loss", loss)
        return loss

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["everest"] = {"losses": list(self.losses), "rng": {k: g.get_state() for k, g in self.gens.items()}}

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        state = checkpoint["everest"]
        self.losses = [float(x) for x in state["losses"]]
        for k, g in self.gens.items():
            g.set_state(state["rng"][k])


class PretrainModule(_Phase):
    def __init__(self, model: MaskedVideoAutoencoder, method: str, cfg, seed: int, frames: str | None = None):
        super().__init__(cfg.pretrain, {"masks": torch.Generator().manual_seed(derive_seed(seed, "masks")),
                                        "frames": torch.Generator().manual_seed(derive_seed(seed, "frames"))}, seed)
        self.model, self.method, self.sel, self.frames = model, method, cfg.selection, frames

    def training_step(self, batch, _):
        self._lr_step()
        clip = batch[0]
        if self.frames is not None:
            chosen = choose_pairs(self.model, clip, self.frames, self.sel.rho_pre, self.gens["frames"])
            clip = torch.stack([pair_frames(c, pairs) for c, pairs in zip(clip, chosen)])
        e, vis, tgt = make_masks(self.model, clip, self.method, self.sel, self.gens["masks"])
        return self._record(self.model(clip, vis, tgt, embeddings=e))

    def configure_optimizers(self):
        p = self.phase
        return torch.optim.AdamW(param_groups(self.model, p.weight_decay), lr=p.lr, betas=tuple(p.betas), foreach=True)


class FinetuneModule(_Phase):
    def __init__(self, model: VideoClassifier, cfg, seed: int):
        super().__init__(cfg.finetune, {"prune": torch.Generator().manual_seed(derive_seed(seed, "ft-prune"))}, seed)
        self.model = model
        self.crit = nn.CrossEntropyLoss(label_smoothing=cfg.finetune.label_smoothing)

    def training_step(self, batch, _):
        self._lr_step()
        video, labels = batch
        return self._record(self.crit(self.model(video, self.gens["prune"]), labels))

    def configure_optimizers(self):
        f = self.phase
        depth = len(self.model.encoder.blocks)
        return torch.optim.AdamW(param_groups(self.model, f.weight_decay, f.layer_decay, depth), lr=f.lr,
                                 betas=(0.9, 0.999), foreach=True)


class Snapshots(L.Callback):
    """Weights at chosen steps as ckpt_dir/<name>.pt (runs before the step checkpoint is written)."""

    def __init__(self, ckpt_dir: Path, snapshots: dict[int, str]):
        self.ckpt_dir, self.snapshots = Path(ckpt_dir), snapshots

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        name = self.snapshots.get(trainer.global_step)
        if name is not None and trainer.is_global_zero:
            torch.save(pl_module.model.state_dict(), self.ckpt_dir / f"{name}.pt")


def cache_config(cfg) -> dict:
    """What decides the trained weights: the config without its `trainer` and `logging` sections and the
    loader's worker count (the batches do not depend on it)."""
    out = {k: v for k, v in cfg.to_dict().items() if k not in ("trainer", "logging")}
    out["data"] = {k: v for k, v in out["data"].items() if k != "workers"}
    return out


def run_root(ckpt_dir: Path, cfg) -> Path:
    """The folder a training keeps `checkpoints/last.ckpt` and `logs/` in: `ckpt_dir/run-<config hash>`.
    A checkpoint of another config is never in the way, so no process deletes one: under DDP every
    rank looks for `last.ckpt` before the process group exists, and a stale one that rank 0 deleted
    while another rank read it would stop that rank. Old `run-*` folders stay until removed by hand.
    Snapshot weights (`<name>.pt`) stay in `ckpt_dir`."""
    return Path(ckpt_dir) / f"run-{config_hash(cache_config(cfg))[:12]}"


def train(module: _Phase, loader: DataLoader, cfg, seed: int, ckpt_dir: Path, device: str,
           callbacks: list | None = None) -> list[float]:
    opts = trainer_options(cfg)
    opts.setdefault("accelerator", "gpu" if device.startswith("cuda") else device)
    steps = module.phase.steps
    trainer = make_trainer(run_root(ckpt_dir, cfg), seed=seed, max_steps=steps, max_epochs=1, callbacks=callbacks,
                           progress=None if cfg.get("profile") == "full" else False,
                           log_every_n_steps=max(1, steps // 50), cache_config=cache_config(cfg), **opts)
    fit(trainer, module, loader)
    return module.losses
