"""Logger factory: CSVLogger always; wandb when asked, offline by default (no account, no network)."""
from __future__ import annotations

import os
from pathlib import Path

WANDB_MODES = ("disabled", "offline", "online")


def make_loggers(out_dir: str | Path, name: str, wandb: str = "disabled", project: str = "icml24-repro") -> list:
    """Return Lightning loggers writing under `out_dir`.

    wandb: "disabled" (default: nothing written), "offline" (a local run folder under out_dir,
    syncable later with `wandb sync`), or "online" (needs an account and a network; opt-in only).
    """
    from lightning.pytorch.loggers import CSVLogger

    if wandb not in WANDB_MODES:
        raise ValueError(f"unknown wandb mode {wandb!r}; valid: {list(WANDB_MODES)}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    loggers = [CSVLogger(save_dir=str(out_dir), name=name, version="")]
    if wandb != "disabled":
        from lightning.pytorch.loggers import WandbLogger

        os.environ.setdefault("WANDB_SILENT", "true")
        loggers.append(
            WandbLogger(
                name=name, project=project, save_dir=str(out_dir), offline=(wandb == "offline"),
                mode=wandb, settings=None,
            )
        )
    return loggers
