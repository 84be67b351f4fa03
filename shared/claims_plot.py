"""The ledger's forest plot: one row per claim, its interval against the test's region.

Claims live on different scales, so each row has its own x-axis: the shaded band is the region
that satisfies the test, the bar is the 90% interval (a dot alone for an exact number or n = 1),
and the colour is the verdict.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence

from matplotlib.ticker import FuncFormatter, MaxNLocator

from .plotting import plt, save_figure

STATUS_COLORS = {"PASS": "#2ca02c", "FAIL": "#d62728", "INCONCLUSIVE": "#ff7f0e", "NOT RUN": "#7f7f7f"}


def _limits(row: Mapping) -> tuple[float, float]:
    pts = [v for v in (row.get("lo"), row.get("hi"), row.get("reproduced")) if v is not None and math.isfinite(v)]
    pts += [v for v in (row.get("region") or []) if v is not None and math.isfinite(v)]
    if not pts:
        return -1.0, 1.0
    lo, hi = min(pts), max(pts)
    pad = 0.15 * (hi - lo) if hi > lo else max(abs(lo) * 0.1, 1e-3)
    return lo - pad, hi + pad


def forest_plot(rows: Sequence[Mapping], title: str = "") -> "plt.Figure":
    """A figure with one axis row per claim (dicts as in claims.json)."""
    rows = list(rows)
    n = max(len(rows), 1)
    height = 0.32 * n + 0.8
    fig, axes = plt.subplots(n, 1, figsize=(8.0, height), squeeze=False)
    for ax, row in zip(axes[:, 0], rows):
        color = STATUS_COLORS.get(row["status"], "black")
        lo_lim, hi_lim = _limits(row)
        region = row.get("region") or [-math.inf, math.inf]
        ax.axvspan(max(region[0], lo_lim), min(region[1], hi_lim), color="#2ca02c", alpha=0.12, lw=0)
        for edge in region:
            if edge is not None and math.isfinite(edge):
                ax.axvline(edge, color="black", lw=0.8)
        est = row.get("reproduced")
        if row.get("lo") is not None and row.get("hi") is not None:
            ax.plot([row["lo"], row["hi"]], [0, 0], color=color, lw=3, solid_capstyle="butt")
        if est is not None and math.isfinite(est):
            ax.plot([est], [0], "o", color=color, ms=4)
        ax.set_xlim(lo_lim, hi_lim)
        ax.set_ylim(-1, 1)
        ax.set_yticks([])
        ax.grid(False)
        for side in ("left", "right", "top"):
            ax.spines[side].set_visible(False)
        ax.tick_params(axis="x", labelsize=6, length=2, pad=1)
        ax.xaxis.set_major_locator(MaxNLocator(5))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.3g}"))
        n_txt = "exact" if row.get("evidence") == "exact" else (f"n={row['n']}" if row.get("n") else "")
        label = row["id"] + (" (Δ)" if row.get("evidence") == "paired" else "")
        ax.text(-0.01, 0.5, label, transform=ax.transAxes, ha="right", va="center", fontsize=7)
        ax.text(1.01, 0.5, f"{row['status']} {n_txt}", transform=ax.transAxes, ha="left", va="center",
                fontsize=7, color=color)
    if not rows:
        axes[0, 0].text(0.5, 0.5, "no claims", ha="center", va="center")
    if title:
        fig.suptitle(title, fontsize=9, y=1 - 0.12 / height, va="top")
    fig.subplots_adjust(left=0.33, right=0.84, hspace=1.6, top=1 - 0.55 / height, bottom=0.3 / height)
    return fig


def save_forest_plot(rows: Sequence[Mapping], path: str | Path, profile: str) -> list[Path]:
    """Write the forest plot as `path` (PNG) and its PDF twin; returns both paths."""
    fig = forest_plot(rows, title=f"Claims ledger, profile {profile}: 90% intervals against each test")
    paths = save_figure(fig, Path(path).with_suffix(""))
    plt.close(fig)
    return paths
