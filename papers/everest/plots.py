"""Figures: selected tokens overlaid on clips, a reconstruction."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch


def token_grid(mask: torch.Tensor, slices: int, side: int) -> np.ndarray:
    """[N] bool -> [T', side, side] bool."""
    return mask.reshape(slices, side, side).cpu().numpy()


def overlay_axes(ax, frame: np.ndarray, kept: np.ndarray, patch: int, digit: np.ndarray | None = None) -> None:
    """One frame with kept tokens tinted green and dropped ones dimmed; the moving digit outlined."""
    ax.imshow(frame, cmap="gray", vmin=0, vmax=1)
    up = np.kron(kept.astype(float), np.ones((patch, patch)))
    rgba = np.zeros((*up.shape, 4))
    rgba[..., 1] = 1.0
    rgba[..., 3] = np.where(up > 0, 0.28, 0.0)
    dim = np.zeros((*up.shape, 4))
    dim[..., 3] = np.where(up > 0, 0.0, 0.45)
    ax.imshow(rgba)
    ax.imshow(dim)
    if digit is not None and digit.any():
        ax.contour(digit.astype(float), levels=[0.5], colors="red", linewidths=0.6)
    ax.set_xticks([])
    ax.set_yticks([])


def overlay_figure(video: torch.Tensor, kept: torch.Tensor, patch: int, tubelet: int,
                   moving: torch.Tensor | None = None, titles: list[str] | None = None, slices_shown: int = 4):
    """Rows: clips; columns: evenly spaced temporal slices (first frame of each tubelet)."""
    n, _, f, h, _ = video.shape
    t = f // tubelet
    cols = np.linspace(0, t - 1, min(slices_shown, t)).round().astype(int)
    fig, axes = plt.subplots(n, len(cols), figsize=(1.7 * len(cols), 1.75 * n), squeeze=False)
    for i in range(n):
        grid = token_grid(kept[i], t, h // patch)
        for j, s in enumerate(cols):
            frame = video[i, :, s * tubelet].mean(0).cpu().numpy()
            digit = None if moving is None else moving[i, s * tubelet].cpu().numpy()
            overlay_axes(axes[i, j], frame, grid[s], patch, digit)
            if i == 0:
                axes[i, j].set_title(f"slice {s}", fontsize=8)
        if titles:
            axes[i, 0].set_ylabel(titles[i], fontsize=7)
    fig.suptitle("Kept tokens (green); dropped (dark); moving digit outlined (red)", fontsize=8)
    fig.tight_layout()
    return fig


def reconstruction_figure(video: torch.Tensor, recon: torch.Tensor, visible: torch.Tensor, target: torch.Tensor,
                          patch: int, tubelet: int, slices_shown: int = 4):
    """Input, encoder view (visible tokens only), reconstruction of the targets, for one clip."""
    f, h = video.shape[1], video.shape[2]
    t = f // tubelet
    cols = np.linspace(0, t - 1, min(slices_shown, t)).round().astype(int)
    vis = token_grid(visible, t, h // patch)
    fig, axes = plt.subplots(3, len(cols), figsize=(1.7 * len(cols), 5.2), squeeze=False)
    for j, s in enumerate(cols):
        frame = video[:, s * tubelet].mean(0).cpu().numpy()
        axes[0, j].imshow(frame, cmap="gray", vmin=0, vmax=1)
        axes[1, j].imshow(frame * np.kron(vis[s], np.ones((patch, patch))), cmap="gray", vmin=0, vmax=1)
        axes[2, j].imshow(recon[:, s * tubelet].mean(0).cpu().numpy(), cmap="gray", vmin=0, vmax=1)
        axes[0, j].set_title(f"slice {s}", fontsize=8)
        for i in range(3):
            axes[i, j].set_xticks([])
            axes[i, j].set_yticks([])
    for i, name in enumerate(["input", "visible", "visible + recon. targets"]):
        axes[i, 0].set_ylabel(name, fontsize=8)
    fig.tight_layout()
    return fig


def training_curves(logs, metric: str = "loss"):
    """Loss against step of every training (CSV logs, `shared.loggers.read_logs` of the checkpoints
    folder): pre-training arms left, fine-tuning arms right; one line per arm, the mean over seeds."""
    logs = logs[logs.metric == metric].copy()
    parts = logs.run.str.split("/", expand=True)
    logs["phase"] = parts[0].str.split("_").str[0]
    logs["arm"] = parts[0].str.split("_", n=1).str[1]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for ax, phase in zip(axes, ("pretrain", "finetune")):
        sub = logs[logs.phase == phase]
        for arm, g in sub.groupby("arm"):
            curve = g.groupby("step").value.mean()
            ax.plot(curve.index, curve.values, label=arm, lw=1)
        ax.set(title=f"{phase} (mean over seeds)", xlabel="step", ylabel=metric)
        if not sub.empty:
            ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
