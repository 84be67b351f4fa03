"""Lightning trainer factory: CPU/GPU, precision, seeding, checkpoints, and resume after a kill.

Resume is exact: checkpoints are taken at epoch ends (`last.ckpt`), every training step re-seeds
the global RNGs from (seed, step), and `EpochSeededSampler` shuffles from (seed, epoch), so a run
killed at any point and resumed gives the same weights as an uninterrupted one.

Resume is keyed (`shared.run_cache`): `fit` resumes from `last.ckpt` only when the key written beside
it (`last.ckpt.key.json`: the seed, and the hash of `make_trainer(cache_config=...)` when given)
equals this run's. Otherwise it logs one line saying why and trains from scratch, so an edited
config rerun into the same folder does not silently continue the old run.
"""
from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Iterator

import numpy as np
import torch
from torch.utils.data import Sampler

from . import run_cache
from .seeding import derive_seed, seed_everything

CKPT_NAME = "last"


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be read."""


class EpochSeededSampler(Sampler[int]):
    """Shuffles 0..n-1 with a permutation that depends only on (seed, epoch).

    Lightning calls `set_epoch` on samplers that have it, so a resumed run sees the same order.
    """

    def __init__(self, n: int, seed: int, shuffle: bool = True):
        self.n, self.seed, self.shuffle, self.epoch = n, seed, shuffle, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        if not self.shuffle:
            return iter(range(self.n))
        g = torch.Generator().manual_seed(derive_seed(self.seed, "sampler", self.epoch))
        return iter(torch.randperm(self.n, generator=g).tolist())

    def __len__(self) -> int:
        return self.n


def _callbacks(seed: int):
    from lightning.pytorch.callbacks import Callback

    class StepReseed(Callback):
        """Re-seed global RNGs before every step from (seed, global step), so dropout and other
        draws never depend on history (e.g. a dataloader iterator created earlier on resume)."""

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
            step_seed = derive_seed(seed, "step", trainer.global_step)
            random.seed(step_seed)
            np.random.seed(step_seed)
            torch.manual_seed(step_seed)

    class WriteCacheKey(Callback):
        """Write the run's key beside `last.ckpt` once training starts (after Lightning's setup, which
        warns about a non-empty checkpoint folder), so a run killed later resumes under its key."""

        def on_train_start(self, trainer, pl_module) -> None:
            key = getattr(trainer, "cache_key", None)
            if key is not None:
                run_cache.write_key(Path(trainer.default_root_dir) / "checkpoints" / f"{CKPT_NAME}.ckpt", key)

    return [StepReseed(), WriteCacheKey()]


def make_trainer(
    out_dir: str | Path,
    *,
    seed: int,
    max_epochs: int | None = None,
    max_steps: int = -1,
    accelerator: str = "auto",
    precision: str = "32-true",
    loggers: list | bool = False,
    progress: bool | None = None,
    gradient_clip_val: float | None = None,
    log_every_n_steps: int = 10,
    callbacks: list | None = None,
    cache_config: dict | None = None,
):
    """A deterministic `lightning.Trainer` that checkpoints `last.ckpt` under `out_dir/checkpoints`.

    progress: show a progress bar (default: yes, except under CI=true).
    cache_config: what decides the trained weights (e.g. the data and model sections of the config);
    `fit` resumes only from a checkpoint made with the same hash of it and the same seed.
    """
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint

    seed_everything(seed)
    ckpt = ModelCheckpoint(dirpath=str(Path(out_dir) / "checkpoints"), filename=CKPT_NAME,
                           save_last=False, save_top_k=1, every_n_epochs=1, save_on_train_epoch_end=True,
                           enable_version_counter=False)
    trainer = L.Trainer(
        default_root_dir=str(out_dir),
        accelerator=accelerator,
        devices=1,
        precision=precision,
        max_epochs=max_epochs,
        max_steps=max_steps,
        deterministic=True,
        logger=loggers,
        enable_progress_bar=(os.environ.get("CI") != "true") if progress is None else progress,
        enable_model_summary=False,
        gradient_clip_val=gradient_clip_val,
        log_every_n_steps=log_every_n_steps,
        callbacks=[ckpt, *_callbacks(seed), *(callbacks or [])],
        num_sanity_val_steps=0,
    )
    trainer.cache_key = run_cache.cache_key(cache_config, seed)
    return trainer


def _first_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:160] if text else ''}"


def last_checkpoint(out_dir: str | Path) -> Path | None:
    """The checkpoint to resume from, after checking that it loads; None when there is none."""
    path = Path(out_dir) / "checkpoints" / f"{CKPT_NAME}.ckpt"
    if not path.exists():
        return None
    try:
        torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any failure to read is a corrupt checkpoint
        raise CheckpointError(
            f"checkpoint {path} is corrupted or unreadable ({_first_line(err)}). "
            f"Delete it to train from scratch, or restore it from a backup."
        ) from err
    return path


def fit(trainer, module, train_dataloaders, val_dataloaders=None) -> Path | None:
    """`trainer.fit`, resuming from `last.ckpt` under the trainer's root when one exists and its key
    (seed, config hash) matches the trainer's; a stale one is deleted, with one logged line why.

    Returns the checkpoint resumed from (None for a fresh run).
    """
    resume = last_checkpoint(trainer.default_root_dir)
    key = getattr(trainer, "cache_key", None)
    if key is not None:
        if resume is not None and not run_cache.reusable(resume, key, what=f"checkpoint under {trainer.default_root_dir}"):
            resume.unlink()
            resume = None
    trainer.fit(module, train_dataloaders=train_dataloaders, val_dataloaders=val_dataloaders,
                ckpt_path=str(resume) if resume else None, weights_only=True)
    return resume


def load_weights(module: torch.nn.Module, path: str | Path) -> torch.nn.Module:
    """Load a Lightning checkpoint's (or a plain state dict's) weights, safely."""
    path = Path(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001
        raise CheckpointError(f"checkpoint {path} is corrupted or unreadable ({_first_line(err)})") from err
    module.load_state_dict(state.get("state_dict", state))
    return module
