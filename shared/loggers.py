"""Logger factory: CSVLogger always; wandb when asked, offline by default (no account, no network).

The CSV log is kept across a resume (Lightning's CSVLogger deletes an existing metrics.csv);
`shared.training.fit` cuts it back to the checkpoint's step first, so a killed and resumed run ends
with the same log as an uninterrupted one. WANDB_MODE=disabled in the environment (CI) turns wandb off.
"""
from __future__ import annotations

import csv
import os
from pathlib import Path

WANDB_MODES = ("disabled", "offline", "online")
# The running experiment, for wandb's run names: set by shared.experiment before each experiment.
RUN_CONTEXT: dict = {}


def set_run_context(paper: str, experiment: str, out: str | Path, config: dict | None = None) -> None:
    RUN_CONTEXT.clear()
    RUN_CONTEXT.update(paper=paper, experiment=experiment, out=Path(out), config=config or {})


def run_profile() -> str | None:
    """The running experiment's profile (None outside an experiment)."""
    return (RUN_CONTEXT.get("config") or {}).get("profile")


def wandb_names(out_dir: str | Path) -> dict:
    """wandb's name, group, job type and config of the training that writes under `out_dir`: named
    for the experiment and the arm (its folder under the experiment's checkpoints), grouped per paper."""
    ctx = RUN_CONTEXT
    if not ctx:
        return {"name": Path(out_dir).name, "group": None, "job_type": None, "config": {}}
    try:
        arm = Path(out_dir).resolve().relative_to((ctx["out"] / "checkpoints" / ctx["experiment"]).resolve())
    except ValueError:
        arm = Path(Path(out_dir).name)
    name = ctx["experiment"] + ("" if str(arm) in ("", ".") else f"/{arm}")
    return {"name": name, "group": ctx["paper"], "job_type": ctx["experiment"], "config": ctx["config"]}


def finish_wandb() -> None:
    """End the process's wandb run, so that the next training starts its own (not the same run id)."""
    import sys

    wandb = sys.modules.get("wandb")
    if wandb is not None and getattr(wandb, "run", None) is not None:
        wandb.finish()


def make_loggers(out_dir: str | Path, name: str, wandb: str = "disabled", project: str = "icml24-repro") -> list:
    """Return Lightning loggers writing under `out_dir`.

    wandb: "disabled" (default: nothing written), "offline" (a local run folder under out_dir,
    syncable later with `wandb sync`), or "online" (needs an account and a network; opt-in only).
    A wandb run is named for the experiment and arm, grouped per paper, with the experiment's config
    (`wandb_names`); its debug logs and cache stay under out_dir too, not in the home folder.
    """
    if wandb not in WANDB_MODES:
        raise ValueError(f"unknown wandb mode {wandb!r}; valid: {list(WANDB_MODES)}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    loggers = [_csv_logger(save_dir=str(out_dir), name=name, version="")]
    if wandb != "disabled" and os.environ.get("WANDB_MODE") != "disabled":
        from lightning.pytorch.loggers import WandbLogger

        os.environ.setdefault("WANDB_SILENT", "true")
        for key, sub in (("WANDB_CACHE_DIR", "cache"), ("WANDB_CONFIG_DIR", "config"), ("WANDB_DATA_DIR", "data")):
            os.environ[key] = str(out_dir / "wandb" / sub)
        finish_wandb()   # a run left open by an earlier training in this process
        names = wandb_names(out_dir)
        loggers.append(
            WandbLogger(
                name=names["name"], project=project, save_dir=str(out_dir), offline=(wandb == "offline"),
                mode=wandb, settings=None, group=names["group"], job_type=names["job_type"],
                config=names["config"],
            )
        )
    return loggers


def _csv_logger(**kwargs):
    """A CSVLogger that appends to an existing metrics.csv instead of deleting it."""
    from lightning.pytorch.loggers import CSVLogger
    from lightning.pytorch.loggers.csv_logs import ExperimentWriter
    from lightning.pytorch.loggers.logger import rank_zero_experiment

    class KeepingWriter(ExperimentWriter):
        def _check_log_dir_exists(self) -> None:
            if os.path.isfile(self.metrics_file_path):
                with open(self.metrics_file_path, newline="") as f:
                    self.metrics_keys = sorted(next(csv.reader(f), []))

    class KeepingCSVLogger(CSVLogger):
        @property
        @rank_zero_experiment
        def experiment(self):
            if self._experiment is None:
                self._fs.makedirs(self.root_dir, exist_ok=True)
                self._experiment = KeepingWriter(log_dir=self.log_dir)
            return self._experiment

    return KeepingCSVLogger(**kwargs)


def read_logs(root: str | Path, pattern: str = "**/logs/metrics.csv"):
    """Every CSV log under `root` as one long DataFrame: run (the log's folder relative to `root`,
    without the trailing `logs`), step, metric, value (rows without a value dropped)."""
    import pandas as pd

    root = Path(root)
    frames = []
    for path in sorted(root.glob(pattern)):
        df = pd.read_csv(path)
        if df.empty or "step" not in df:
            continue
        long = df.drop(columns=[c for c in ("epoch",) if c in df]).melt(id_vars="step", var_name="metric")
        long = long.dropna(subset=["value"])
        long.insert(0, "run", str(path.parent.parent.relative_to(root)))
        frames.append(long)
    if not frames:
        return pd.DataFrame(columns=["run", "step", "metric", "value"])
    return pd.concat(frames, ignore_index=True)
