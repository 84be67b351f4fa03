"""Training curves of an experiment's many fits: each fit's loss rows (read from its Lightning CSV log)
gathered into one CSV per experiment, `<out>/logs/<experiment>.csv` (a `fit` column, then the paper's
columns), written once at the experiment's end with a provenance sidecar; and their figure.

Papers whose experiments run many short fits (MMP's folds, E2GAN's arms and probes) use this; a fit's
name reads `<group>/...`, its group (an arm, a loss, a variant) is the first part.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd


class Curves:
    """The loss rows of one experiment's fits, with the columns `fit` and `columns`."""

    def __init__(self, columns: list[str]):
        self.columns = ["fit", *columns]
        self.rows: list[dict] = []

    def add(self, fit: str, rows: list[dict]) -> None:
        """Add the rows ({column: value}) of the fit named `fit`."""
        self.rows += [{"fit": fit, **row} for row in rows]

    def save(self, run) -> Path:
        """Write `<run.out>/logs/<run.experiment>.csv` and its provenance sidecar."""
        from .io import write_text
        from .provenance import write_sidecar

        path = write_text(run.dir("logs") / f"{run.experiment}.csv",
                          pd.DataFrame(self.rows, columns=self.columns).to_csv(index=False))
        write_sidecar(path, profile=run.profile, config_hash=run.hash, seed=run.seed, rule=run.rule,
                      wall_time_s=run.wall_time, extra={"paper": run.paper, "experiment": run.experiment})
        return path


def load_curves(results_dir: str | Path) -> pd.DataFrame:
    """Every experiment's curves under `results_dir/logs` (one CSV each), with an `experiment` column."""
    parts = [pd.read_csv(p).assign(experiment=p.stem) for p in sorted(Path(results_dir).glob("logs/*.csv"))]
    parts = [df for df in parts if len(df)]   # an experiment with no logged rows (smoke's empty seed jobs)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["fit", "experiment"])


def group_of(fit: str) -> str:
    """A fit's group: the first part of its name `<group>/...`."""
    return str(fit).split("/", 1)[0]


def curves_figure(curves: pd.DataFrame, x: str, y: str, *, xlabel: str | None = None, ylabel: str | None = None,
                  group=group_of, max_cols: int = 3):
    """One panel per experiment: `y` against `x`, one line per group of fits (the mean over its fits at
    each `x`), with the fits' range shaded; `group(fit)` names a fit's group. A panel per experiment,
    each on its own scale (different trainings' losses are not comparable)."""
    import matplotlib.pyplot as plt

    data = curves.dropna(subset=[x, y]).assign(group=lambda d: d.fit.map(group))
    names = sorted(data.experiment.unique())
    cols = min(max_cols, max(1, len(names)))
    rows = -(-len(names) // cols) if names else 1
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.6 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        part = data[data.experiment == name]
        for label, g in part.groupby("group", sort=True):
            stats = g.groupby(x)[y].agg(["mean", "min", "max"])
            line, = ax.plot(stats.index, stats["mean"], lw=1.2, label=f"{label} ({g.fit.nunique()} fits)")
            ax.fill_between(stats.index, stats["min"], stats["max"], color=line.get_color(), alpha=0.15)
        ax.set(title=name, xlabel=xlabel or x, ylabel=ylabel or y)
        ax.legend(fontsize=7)
    if not names:
        axes[0, 0].text(0.5, 0.5, "no training curves logged", ha="center", va="center",
                        transform=axes[0, 0].transAxes)
    for ax in list(axes.flat)[max(1, len(names)):]:
        ax.axis("off")
    fig.tight_layout()
    return fig
