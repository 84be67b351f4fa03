"""The headline figure: per task and decision metric, each latent solver's mean with its 90 % interval
over priors (the ledger's unit), beside the classical floor (band) and the ceilings (dotted)."""
from __future__ import annotations

import numpy as np

from shared.intervals import group_means, mean_interval

from .problems import TASK_NAMES

SHOWN = ("ldps", "psld", "p2l")
LABELS = {"ssim": "SSIM", "psnr": "PSNR (dB)"}


def interval(s: dict) -> tuple[float, float, float]:
    """(mean, lo, hi) of a per-image sample: over its groups' means (priors) where grouped, else over images."""
    v = np.asarray(s["values"], dtype=float)
    if "groups" in s:
        v = group_means(v, s["groups"])[1]
    if len(v) < 2:
        return float(v.mean()), float(v.mean()), float(v.mean())
    lo, hi, _ = mean_interval(v)
    return float(v.mean()), float(lo), float(hi)


def main_comparison_figure(parts: dict, floors: dict, metrics=("ssim", "psnr"), ceilings=("vae_round_trip",)):
    """parts: task -> main_<task>.json; floors: task -> the floors job's arms (`classical`, ceilings)."""
    import matplotlib.pyplot as plt

    tasks = [t for t in parts if t in floors]
    fig, axes = plt.subplots(len(metrics), max(len(tasks), 1), figsize=(2.3 * max(len(tasks), 1), 2.4 * len(metrics)),
                             squeeze=False)
    for j, task in enumerate(tasks):
        methods = parts[task]["methods"]
        shown = [m for m in SHOWN if m in methods]
        for i, metric in enumerate(metrics):
            ax = axes[i, j]
            mean, lo, hi = interval(floors[task]["classical"][metric])
            ax.axhspan(lo, hi, color="0.85", zorder=0)
            ax.axhline(mean, color="0.4", lw=1, label="classical floor")
            for c in ceilings:
                if c in floors[task]:
                    ax.axhline(interval(floors[task][c][metric])[0], color="0.3", ls=":", lw=1, label=c.replace("_", " "))
            for x, m in enumerate(shown):
                mu, a, b = interval(methods[m][metric])
                ax.errorbar([x], [mu], yerr=[[mu - a], [b - mu]], fmt="o", color=f"C{x}", capsize=3, label=m)
            ax.set_xticks(range(len(shown)), shown, fontsize=7)
            ax.set_xlim(-0.6, len(shown) - 0.4)
            if i == 0:
                ax.set_title(TASK_NAMES.get(task, task), fontsize=8)
            if j == 0:
                ax.set_ylabel(LABELS.get(metric, metric))
    handles, labels = axes[0, 0].get_legend_handles_labels()
    if labels:
        fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=7, frameon=False)
    fig.suptitle("Latent solvers against the classical floor (90 % intervals over priors)", fontsize=9)
    fig.tight_layout(rect=(0, 0.06, 1, 0.95))
    return fig
