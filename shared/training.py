"""Lightning trainer factory: CPU/GPU, DDP, precision, seeding, logging, checkpoints, and resume after a kill.

Resume is exact: `last.ckpt` is written at epoch ends and, with `every_n_train_steps`, every N steps;
every training step re-seeds the global RNGs from (seed, step); the samplers of `shared.sampling`
draw from (seed, epoch), and `fit` trains through a `ResumableDataLoader`, whose place in the epoch
is saved in the checkpoint, so a run killed at any step and resumed gives the same weights as an
uninterrupted one.

Resume is keyed (`shared.run_cache`): `fit` resumes from `last.ckpt` only when the run's key (the
seed, and the hash of `make_trainer(cache_config=...)` when given), stored in the checkpoint and
beside it (`last.ckpt.key.json`), equals this run's. Otherwise it logs one line saying why and
trains from scratch, so an edited config rerun into the same folder does not silently continue.

Logging: a CSV log always (`<out_dir>/logs/metrics.csv`, cut back to the checkpoint on resume);
wandb offline or online only when asked (`shared.loggers`). DDP: `devices`, `strategy`, `num_nodes`;
our samplers shard themselves, so Lightning's distributed sampler is off.
`trainer_options(cfg)` reads a paper config's `trainer:` and `logging:` sections; `shared.experiment`
makes them the defaults of every `make_trainer` of the experiment (`set_run_options`).
"""
from __future__ import annotations

import contextlib
import logging
import os
import random
import tempfile
import warnings
from pathlib import Path
from typing import Iterator

import numpy as np
import torch

from . import run_cache
from .sampling import EpochSeededSampler, RandomBatchSampler, ResumableDataLoader, is_sharded, resumable  # noqa: F401
from .seeding import derive_seed, seed_everything

CKPT_NAME = "last"
LOG_NAME = "logs"
TRAINER_KEYS = ("accelerator", "devices", "strategy", "num_nodes", "every_n_train_steps", "precision")


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be read."""


def _reseed_torch(seed: int) -> None:
    """`torch.manual_seed` without its cost when CUDA is not initialised: there it queues a lazy
    CUDA seed that records the Python call stack (~1.5 ms at Lightning's call depth, against ~0.01 ms
    for the CPU generator; measured, 2000 calls). Same CPU stream; CUDA seeded once it is in use."""
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(seed)


def _callbacks(seed: int):
    from lightning.pytorch.callbacks import Callback

    class StepReseed(Callback):
        """Re-seed global RNGs before every step from (seed, global step), so dropout and other
        draws never depend on history (e.g. a dataloader iterator created earlier on resume)."""

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
            step_seed = derive_seed(seed, "step", trainer.global_step)
            random.seed(step_seed)
            np.random.seed(step_seed)
            _reseed_torch(step_seed)

    class RunKey(Callback):
        """The run's key beside `last.ckpt` once training starts (after Lightning's setup, which warns
        about a non-empty checkpoint folder) and inside every checkpoint; the loggers are flushed at
        each checkpoint, so the CSV log holds every step the checkpoint holds."""

        def on_train_start(self, trainer, pl_module) -> None:
            key = getattr(trainer, "cache_key", None)
            if key is not None and trainer.is_global_zero:
                run_cache.write_key(checkpoint_path(trainer.default_root_dir), key)

        def on_save_checkpoint(self, trainer, pl_module, checkpoint) -> None:
            checkpoint["cache_key"] = getattr(trainer, "cache_key", None)
            for lg in trainer.loggers:
                lg.save()

    return [StepReseed(), RunKey()]


def checkpoint_path(out_dir: str | Path) -> Path:
    return Path(out_dir) / "checkpoints" / f"{CKPT_NAME}.ckpt"


DEFAULTS = {"accelerator": "auto", "devices": 1, "strategy": "auto", "num_nodes": 1, "precision": "32-true",
            "every_n_train_steps": None, "wandb": "disabled"}
RUN_OPTIONS: dict = {}   # the running experiment's trainer options (shared.experiment sets them)


def set_run_options(options: dict) -> None:
    """Make `options` (see `trainer_options`) the defaults of every `make_trainer` in this process,
    so a paper's trainings follow its config's `trainer:` / `logging:` sections without passing them."""
    unknown = sorted(set(options) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"unknown trainer options {unknown}; valid: {sorted(DEFAULTS)}")
    RUN_OPTIONS.clear()
    RUN_OPTIONS.update(options)


def trainer_options(cfg) -> dict:
    """`make_trainer` keyword arguments from a paper config's optional sections

        trainer: {accelerator, devices, strategy, num_nodes, every_n_train_steps, precision}
        logging: {wandb: disabled | offline | online}

    (keys left out keep `make_trainer`'s defaults)."""
    get = cfg.get if hasattr(cfg, "get") else (lambda k, d=None: getattr(cfg, k, d))
    section = dict(get("trainer", None) or {})
    unknown = sorted(set(section) - set(TRAINER_KEYS))
    if unknown:
        raise ValueError(f"unknown trainer keys {unknown}; valid: {list(TRAINER_KEYS)}")
    opts = {k: v for k, v in section.items() if v is not None}
    wandb = (dict(get("logging", None) or {})).get("wandb")
    if wandb is not None:
        opts["wandb"] = wandb
    return opts


def make_trainer(
    out_dir: str | Path,
    *,
    seed: int,
    max_epochs: int | None = None,
    max_steps: int = -1,
    accelerator: str | None = None,
    devices: int | str | None = None,
    strategy: str | None = None,
    num_nodes: int | None = None,
    precision: str | None = None,
    every_n_train_steps: int | None = None,
    loggers: list | bool | None = None,
    wandb: str | None = None,
    progress: bool | None = None,
    gradient_clip_val: float | None = None,
    log_every_n_steps: int = 10,
    callbacks: list | None = None,
    cache_config: dict | None = None,
    checkpoint: bool = True,
):
    """A deterministic `lightning.Trainer` that checkpoints `out_dir/checkpoints/last.ckpt` at epoch
    ends and, with `every_n_train_steps`, every N optimiser steps.

    accelerator, devices, strategy, num_nodes, precision, every_n_train_steps, wandb: None takes the
    running experiment's config (`set_run_options`, from its `trainer:` / `logging:` sections),
    else `DEFAULTS`.

    loggers: None (default) = `shared.loggers.make_loggers(out_dir, "logs", wandb)`: a CSV log at
    `out_dir/logs/metrics.csv`, plus wandb when `wandb` is "offline" / "online"; False = none; or a list.
    devices / strategy / num_nodes: as Lightning's (e.g. 2, "ddp", 1); the samplers of
    `shared.sampling` shard themselves, so Lightning's distributed sampler is off.
    progress: show a progress bar (default: yes); under CI=true never, at the full profile always
    (`show_progress`).
    cache_config: what decides the trained weights (e.g. the data and model sections of the config);
    `fit` resumes only from a checkpoint made with the same hash of it and the same seed.
    checkpoint: False for a throw-away fit (nothing to resume): no checkpoint callbacks at all, and
    Lightning's own default checkpointing off.
    """
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint

    from .loggers import make_loggers

    given = dict(accelerator=accelerator, devices=devices, strategy=strategy, num_nodes=num_nodes,
                 precision=precision, every_n_train_steps=every_n_train_steps, wandb=wandb)
    o = {k: v if v is not None else RUN_OPTIONS.get(k, DEFAULTS[k]) for k, v in given.items()}
    accelerator, devices, strategy, num_nodes, precision, every_n_train_steps, wandb = (
        o["accelerator"], o["devices"], o["strategy"], o["num_nodes"], o["precision"], o["every_n_train_steps"],
        o["wandb"])
    precision = resolve_precision(precision, accelerator)
    seed_everything(seed)
    ckpt_dir = str(Path(out_dir) / "checkpoints")
    common = dict(dirpath=ckpt_dir, filename=CKPT_NAME, save_last=False, save_top_k=1, enable_version_counter=False)
    ckpts = [ModelCheckpoint(every_n_epochs=1, save_on_train_epoch_end=True, **common)] if checkpoint else []
    if every_n_train_steps and checkpoint:
        ckpts.append(ModelCheckpoint(every_n_train_steps=int(every_n_train_steps), save_on_train_epoch_end=False,
                                     **common))
    if loggers is None:
        loggers = make_loggers(out_dir, LOG_NAME, wandb=wandb)
    trainer = L.Trainer(
        default_root_dir=str(out_dir),
        accelerator=accelerator,
        devices=devices,
        strategy=strategy,
        num_nodes=num_nodes,
        precision=precision,
        max_epochs=max_epochs,
        max_steps=max_steps,
        deterministic=True,
        logger=loggers,
        enable_progress_bar=show_progress(progress),
        enable_model_summary=False,
        gradient_clip_val=gradient_clip_val,
        log_every_n_steps=log_every_n_steps,
        callbacks=[*ckpts, *_callbacks(seed), *(callbacks or [])],
        num_sanity_val_steps=0,
        use_distributed_sampler=False,
        enable_checkpointing=checkpoint,
    )
    trainer.cache_key = run_cache.cache_key(cache_config, seed)
    return trainer


HALF_ON_CUDA_ONLY = ("16-mixed", "16-true", 16, "16")


def resolve_precision(precision, accelerator):
    """The precision a trainer gets: the configured one, except fp16 ("16-mixed"/"16-true", the papers'
    CUDA AMP) on a CPU run (accelerator cpu, or auto without CUDA), which runs in "32-true": CPU autocast
    has no fp16 loss scaling and Lightning would silently swap in bf16 (the CPU stand-ins of the
    rehearsal then keep their fp32 numbers)."""
    if precision in HALF_ON_CUDA_ONLY:
        kind = str(accelerator or "auto")
        on_cpu = kind == "cpu" or (kind == "auto" and not torch.cuda.is_available())
        if on_cpu:
            return "32-true"
    return precision


def show_progress(progress: bool | None = None) -> bool:
    """Lightning's progress bar: never under CI=true (quiet logs); always at the full profile, where a
    training runs for hours (whatever the call asks); else as asked (default: on)."""
    from .loggers import run_profile

    if os.environ.get("CI") == "true":
        return False
    if run_profile() == "full":
        return True
    return True if progress is None else progress


@contextlib.contextmanager
def fit_folder(out_dir: str | Path | None, options: dict, prefix: str = "fit_") -> Iterator[Path]:
    """The root folder of one of many short fits: `out_dir` (a checkpointed fit), or, for None, a
    throw-away folder deleted afterwards, with `options` (`make_trainer` keywords, updated in place)
    set to no step checkpoints and no wandb run, whatever the config says. Lightning's per-fit banner
    and warnings that are not ours are silenced inside."""
    logging.getLogger("lightning.pytorch.utilities.rank_zero").setLevel(logging.WARNING)   # no banner per fit
    with tempfile.TemporaryDirectory(prefix=prefix) as scratch, warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*(`srun` command is available|LeafSpec)")   # per fit, not ours
        if out_dir is None:
            options.update(every_n_train_steps=0, wandb="disabled")
        yield Path(out_dir) if out_dir is not None else Path(scratch)


def _first_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:160] if text else ''}"


def _read_checkpoint(path: Path) -> dict:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any failure to read is a corrupt checkpoint
        raise CheckpointError(
            f"checkpoint {path} is corrupted or unreadable ({_first_line(err)}). "
            f"Delete it to train from scratch, or restore it from a backup."
        ) from err


def last_checkpoint(out_dir: str | Path) -> Path | None:
    """The checkpoint to resume from, after checking that it loads; None when there is none."""
    path = checkpoint_path(out_dir)
    if not path.exists():
        return None
    _read_checkpoint(path)
    return path


def _stale_reason(path: Path, key: dict) -> str | None:
    """Why the checkpoint at `path` cannot be resumed by a run with `key` (None: it can)."""
    stored = _read_checkpoint(path).get("cache_key")
    if stored is not None:   # the key inside the checkpoint (every checkpoint carries it)
        if stored.get("seed") != key.get("seed"):
            return f"{path} was made with seed {stored.get('seed')}, this run has seed {key.get('seed')}"
        if stored.get("config_hash") != key.get("config_hash"):
            return (f"{path} was made with config hash {stored.get('config_hash')}, this run's is "
                    f"{key.get('config_hash')}")
    return run_cache.stale_reason(path, key)


def _trim_csv(out_dir: Path, before_step: int | None) -> None:
    """Keep the CSV log consistent with the checkpoint: rows of steps < `before_step` on resume
    (steps after the checkpoint are trained again), none for a fresh run."""
    import csv

    path = Path(out_dir) / LOG_NAME / "metrics.csv"
    if not path.is_file():
        return
    if before_step is None:
        path.unlink()
        return
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
        fields = list(rows[0]) if rows else []
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(r for r in rows if int(r["step"]) < before_step)


def fit(trainer, module, train_dataloaders, val_dataloaders=None) -> Path | None:
    """`trainer.fit`, resuming from `last.ckpt` under the trainer's root when one exists and its key
    (seed, config hash) matches the trainer's; a stale one is deleted, with one logged line why.

    A DataLoader with one of our samplers trains as a `ResumableDataLoader` (mid-epoch resume).
    Returns the checkpoint resumed from (None for a fresh run).
    """
    import logging

    loader = resumable(train_dataloaders)
    if trainer.world_size > 1 and not is_sharded(loader):
        raise ValueError(f"{trainer.world_size} processes need a sampler that shards itself: use "
                         "shared.sampling.EpochSeededSampler or RandomBatchSampler")
    resume = last_checkpoint(trainer.default_root_dir)
    key = getattr(trainer, "cache_key", None)
    if key is not None and resume is not None:
        reason = _stale_reason(resume, key)
        if reason is not None:   # every rank decides the same from the same file; no rank deletes it
            logging.getLogger("shared.run_cache").warning(   # (another rank may still be reading it):
                "checkpoint under %s: not reused, retraining: %s", trainer.default_root_dir, reason)
            resume = None   # the run's first checkpoint overwrites it
    if trainer.is_global_zero:
        step = int(_read_checkpoint(resume).get("global_step", 0)) if resume else None
        _trim_csv(Path(trainer.default_root_dir), step)
    try:
        trainer.fit(module, train_dataloaders=loader, val_dataloaders=val_dataloaders,
                    ckpt_path=str(resume) if resume else None, weights_only=True)
    finally:
        from .loggers import finish_wandb

        finish_wandb()   # one wandb run per training
    return resume


def log_step(module, **values) -> None:
    """Log this training step's scalars to the trainer's loggers: the CSV row that `self.log(name,
    on_step=True)` writes (same `step` and `epoch` columns, every `log_every_n_steps` steps), without
    Lightning's result collection, which costs about 0.7 ms a call on a CPU (its per-call device move
    walks every stored result). For fits of thousands of small steps (MMP); the loggers flush on their
    own schedule, at each checkpoint (`RunKey`) and at the end. Call it from `training_step`."""
    trainer = module.trainer
    step = trainer.fit_loop.epoch_loop._batches_that_stepped   # the step Lightning's logger connector writes
    every = trainer.log_every_n_steps
    if not trainer.loggers or every == 0 or (step + 1) % every:
        return
    row = {name: float(v) for name, v in values.items()}
    row["epoch"] = trainer.current_epoch
    for lg in trainer.loggers:
        lg.log_metrics(row, step=step)


def load_weights(module: torch.nn.Module, path: str | Path) -> torch.nn.Module:
    """Load a Lightning checkpoint's (or a plain state dict's) weights, safely."""
    path = Path(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001
        raise CheckpointError(f"checkpoint {path} is corrupted or unreadable ({_first_line(err)})") from err
    module.load_state_dict(state.get("state_dict", state))
    return module
