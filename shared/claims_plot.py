"""The ledger's forest plot: one row per claim, its interval against the test's region.

Claims live on different scales, so each row has its own x-axis: the shaded band is the region
that satisfies the test, the bar is the 90% interval (a dot alone for an exact number or n = 1),
and the colour is the verdict. A knob claim is a small line instead: its estimate at each knob point
(x) with the 90% band, against the test's region on the y-axis. Rows come paper claims first, then
floors, gates, accounting and diagnostics, each labelled with its kind.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence

from matplotlib.ticker import FuncFormatter, MaxNLocator

from .plotting import plt, save_figure

KIND_ORDER = ("paper", "floor", "gate", "accounting", "diagnostic")
STATUS_COLORS = {"PASS": "#2ca02c", "FAIL": "#d62728", "INCONCLUSIVE": "#ff7f0e", "UNTESTABLE": "#9467bd",
                 "NOT RUN": "#7f7f7f"}


def _limits(row: Mapping) -> tuple[float, float]:
    pts = [v for v in (row.get("lo"), row.get("hi"), row.get("reproduced")) if v is not None and math.isfinite(v)]
    pts += [v for v in (row.get("region") or []) if v is not None and math.isfinite(v)]
    if not pts:
        return -1.0, 1.0
    lo, hi = min(pts), max(pts)
    pad = 0.15 * (hi - lo) if hi > lo else max(abs(lo) * 0.1, 1e-3)
    return lo - pad, hi + pad


def _knob_row(ax, row: Mapping, color: str) -> None:
    """A knob claim: estimate per knob point with its band, the region shaded on the y-axis."""
    curve = row["knob"]
    x, est = curve["points"], curve["estimate"]
    ax.fill_between(x, curve["lo"], curve["hi"], color=color, alpha=0.3, lw=0)
    ax.plot(x, est, "-o", color=color, ms=2.5, lw=1)
    if "verdicts" in curve:   # holds_from: the point test's region
        region = row.get("region") or [-math.inf, math.inf]
        pts = [v for v in (*curve["lo"], *curve["hi"], *region) if v is not None and math.isfinite(v)]
        lo, hi = min(pts), max(pts)
        pad = 0.15 * (hi - lo) if hi > lo else 1.0
        ax.axhspan(max(region[0], lo - pad), min(region[1], hi + pad), color="#2ca02c", alpha=0.12, lw=0)
        ax.set_ylim(lo - pad, hi + pad)
        for edge in region:
            if math.isfinite(edge):
                ax.axhline(edge, color="black", lw=0.6)
    ax.set_yticks([])
    ax.tick_params(axis="x", labelsize=6, length=2, pad=1)
    ax.set_xlabel(curve["name"], fontsize=6, labelpad=0)
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)


def forest_plot(rows: Sequence[Mapping], title: str = "") -> "plt.Figure":
    """A figure with one axis row per claim (dicts as in claims.json)."""
    order = {k: i for i, k in enumerate(KIND_ORDER)}
    rows = sorted(rows, key=lambda r: (r.get("paper", ""), order.get(r.get("kind", "paper"), len(order))))
    n = max(len(rows), 1)
    height = 0.32 * n + 0.8
    fig, axes = plt.subplots(n, 1, figsize=(8.0, height), squeeze=False)
    for ax, row in zip(axes[:, 0], rows):
        color = STATUS_COLORS.get(row["status"], "black")
        label = f"{row['id']} [{row.get('kind', 'paper')}]"
        if row.get("knob"):
            _knob_row(ax, row, color)
            ax.text(-0.01, 0.5, label + " (knob)", transform=ax.transAxes, ha="right", va="center", fontsize=7)
            ax.text(1.01, 0.5, f"{row['status']} n={row.get('n')}", transform=ax.transAxes, ha="left", va="center",
                    fontsize=7, color=color)
            continue
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
        label += " (Δ)" if row.get("evidence") == "paired" else ""
        ax.text(-0.01, 0.5, label, transform=ax.transAxes, ha="right", va="center", fontsize=7)
        ax.text(1.01, 0.5, f"{row['status']} {n_txt}", transform=ax.transAxes, ha="left", va="center",
                fontsize=7, color=color)
    if not rows:
        axes[0, 0].text(0.5, 0.5, "no claims", ha="center", va="center")
    if title:
        fig.suptitle(title, fontsize=9, y=1 - 0.12 / height, va="top")
    fig.subplots_adjust(left=0.38, right=0.84, hspace=1.6, top=1 - 0.55 / height, bottom=0.3 / height)
    return fig


def save_forest_plot(rows: Sequence[Mapping], path: str | Path, profile: str) -> list[Path]:
    """Write the forest plot as `path` (PNG) and its PDF twin; returns both paths."""
    fig = forest_plot(rows, title=f"Claims ledger, profile {profile}: 90% intervals against each test")
    paths = save_figure(fig, Path(path).with_suffix(""))
    plt.close(fig)
    return paths


HEADLINE_KINDS = ("paper", "floor")


def save_paper_plot(rows: Sequence[Mapping], paper: str, path: str | Path, profile: str) -> list[Path]:
    """One paper's headline figure: its paper claims and floors, each 90% interval against its test's
    region (the ledger's forest plot cut to the paper). Writes `path` (PNG) and its PDF twin."""
    mine = [r for r in rows if r.get("paper") == paper and r.get("kind", "paper") in HEADLINE_KINDS]
    fig = forest_plot(mine, title=f"{paper}, profile {profile}: paper claims and floors, 90% intervals "
                                  "against each test (green: the region that passes)")
    paths = save_figure(fig, Path(path).with_suffix(""))
    plt.close(fig)
    return paths


def main(argv: Sequence[str] | None = None) -> None:
    """python -m shared.claims_plot CLAIMS_JSON --paper PAPER --out PNG: one paper's headline figure."""
    import argparse
    import json

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("claims", help="the ledger's claims.json")
    ap.add_argument("--paper", required=True)
    ap.add_argument("--out", required=True, help="the PNG (its PDF twin beside it)")
    args = ap.parse_args(argv)
    ledger = json.loads(Path(args.claims).read_text())
    for path in save_paper_plot(ledger["claims"], args.paper, args.out, ledger.get("profile", "")):
        print(path)


if __name__ == "__main__":
    main()
