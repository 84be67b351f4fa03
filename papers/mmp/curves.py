"""Training curves: the loss curve of every fit (read from its Lightning CSV log) gathered into one
CSV per experiment, `<out>/logs/<experiment>.csv`, with columns fit, epoch, step and loss (the batch
loss of every step); and their figure (the epoch means)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

COLUMNS = ["fit", "epoch", "step", "loss"]


class Curves:
    """The curves of one experiment's fits, written once at its end."""

    def __init__(self):
        self.rows: list[dict] = []

    def add(self, fit: str, state: dict) -> None:
        """Add the curve of the fit named `fit` (`train_survival`'s returned state)."""
        self.rows += [{"fit": fit, **row} for row in state["curve"]]

    def save(self, run) -> Path:
        from shared.provenance import write_sidecar

        path = run.dir("logs") / f"{run.experiment}.csv"
        pd.DataFrame(self.rows, columns=COLUMNS).to_csv(path, index=False)
        write_sidecar(path, profile=run.profile, config_hash=run.hash, seed=run.seed, rule=run.rule,
                      wall_time_s=run.wall_time, extra={"paper": run.paper, "experiment": run.experiment})
        return path


def load_curves(results_dir: str | Path) -> pd.DataFrame:
    """Every experiment's curves under `results_dir/logs`, with an `experiment` column."""
    parts = [pd.read_csv(p).assign(experiment=p.stem) for p in sorted(Path(results_dir).glob("logs/*.csv"))]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=[*COLUMNS, "experiment"])


def group_of(fit: str) -> str:
    """The arm or variant of a fit named `<group>/<fold>` (every fold of it is one group)."""
    return fit.rsplit("/", 1)[0]


def curves_figure(curves: pd.DataFrame):
    """One panel per experiment: the epoch-mean training loss against the epoch, one line per group of
    fits (an arm, a loss or a variant), its mean over the folds with the folds' range shaded."""
    import matplotlib.pyplot as plt

    epochs = (curves.groupby(["experiment", "fit", "epoch"], as_index=False).loss.mean()
              .assign(group=lambda d: d.fit.map(group_of)))
    names = sorted(epochs.experiment.unique())
    cols = min(3, max(1, len(names)))
    rows = -(-len(names) // cols) if names else 1
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.6 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        part = epochs[epochs.experiment == name]
        for group, g in part.groupby("group", sort=True):
            stats = g.groupby("epoch").loss.agg(["mean", "min", "max"])
            line, = ax.plot(stats.index + 1, stats["mean"], lw=1.2, label=f"{group} ({g.fit.nunique()} fits)")
            ax.fill_between(stats.index + 1, stats["min"], stats["max"], color=line.get_color(), alpha=0.15)
        ax.set(title=name, xlabel="epoch", ylabel="training loss (epoch mean)")
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    fig.tight_layout()
    return fig
