"""One plotting style for every paper; figures saved as PNG and PDF."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg") if not matplotlib.get_backend().lower().startswith(("module://", "nbagg", "ipympl", "widget")) else None
import matplotlib.pyplot as plt  # noqa: E402

from .io import atomic_path  # noqa: E402

STYLE = {
    "figure.figsize": (5.0, 3.5),
    "figure.dpi": 110,
    "savefig.dpi": 150,
    "savefig.bbox": "tight",
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
    "image.cmap": "viridis",
    "pdf.fonttype": 42,
    "svg.hashsalt": "repro",
}
# Method colours stay the same across papers: the method in blue, baselines in greys/oranges.
COLORS = ["#1f77b4", "#ff7f0e", "#7f7f7f", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]


def apply_style() -> None:
    plt.rcParams.update(STYLE)
    plt.rcParams["axes.prop_cycle"] = matplotlib.cycler(color=COLORS)


def save_figure(fig: "plt.Figure", stem: str | Path) -> list[Path]:
    """Save `fig` as `<stem>.png` and `<stem>.pdf` (atomically); return both paths.

    PDFs are written without a creation date so that reruns give identical files.
    """
    stem = Path(stem)
    paths = []
    for ext in ("png", "pdf"):
        path = stem.with_suffix(f".{ext}")
        with atomic_path(path) as tmp:
            meta = {"CreationDate": None} if ext == "pdf" else {"Software": None}
            fig.savefig(tmp, format=ext, metadata=meta)
        paths.append(path)
    return paths


apply_style()


def loss_curves(logs, metric: str = "loss", title: str = ""):
    """One panel per training run (`shared.loggers.read_logs` rows: run, step, metric, value): `metric`
    against step, each on its own scale (different trainings' losses are not comparable)."""
    logs = logs[logs.metric == metric]
    runs = list(dict.fromkeys(logs.run))
    fig, axes = plt.subplots(1, max(1, len(runs)), figsize=(3.2 * max(1, len(runs)), 2.6), squeeze=False)
    for ax, run in zip(axes[0], runs):
        g = logs[logs.run == run].groupby("step").value.mean()
        ax.plot(g.index, g.values, lw=1)
        ax.set(title=run, xlabel="step", ylabel=metric)
    if not runs:
        axes[0, 0].text(0.5, 0.5, f"no '{metric}' rows logged", ha="center", va="center", transform=axes[0, 0].transAxes)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig
