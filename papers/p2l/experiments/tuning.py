"""The equal-budget tuning grid and its search on the validation split."""
from __future__ import annotations

import pandas as pd
import torch

from .. import metrics as M
from .problems import TASK_NAMES, VECTOR_HPARAMS, _solve_batches, method_hparams


def tuning_grid(cfg, method: str) -> list[dict]:
    """The equal-budget grid of `method`: every method tries every ρ of `tuning.rho`, crossed with its
    own extra axes (`tuning.extra.<method>`, e.g. PSLD's γ, P2L's prompt_lr)."""
    import itertools

    extra = dict((cfg.tuning.get("extra", {}) or {}).get(method, {}) or {}) if method else {}
    keys = ["rho", *extra]
    axes = [list(cfg.tuning.rho), *(list(v) for v in extra.values())]
    return [dict(zip(keys, map(float, combo))) for combo in itertools.product(*axes)]


def tune(cfg, method, task, op, ldm, val, seed, base: dict | None = None,
         extra_axes: bool = True) -> tuple[dict, list[dict]]:
    """Equal budget: each method tries its grid (`tuning_grid`) on the validation split and keeps the
    point of best mean SSIM. Grid points that differ only in ρ, γ or prompt_lr are solved as one batch
    (per-image values, the same z_T per image), which gives the same reconstructions as solving them
    one by one; any other axis splits the grid into one batch per value."""
    y = op.measure(val["images"], seed)
    n = len(val["images"])
    grid = tuning_grid(cfg, method if extra_axes else None)
    groups = {}
    for point in grid:
        key = tuple((k, v) for k, v in point.items() if k not in VECTOR_HPARAMS)
        groups.setdefault(key, []).append(point)
    rows = []
    for key, points in groups.items():
        hp = {**method_hparams(cfg, method), **(base or {}), **dict(key)}
        for k in VECTOR_HPARAMS:
            if k in points[0]:
                hp[k] = torch.tensor([p[k] for p in points for _ in range(n)], dtype=torch.float32)
        caps = None if val["captions"] is None else list(val["captions"]) * len(points)
        x, *_ = _solve_batches(method, y.repeat(len(points), *[1] * (y.dim() - 1)), op, ldm, cfg, seed, caps,
                               repeats=len(points), **hp)
        ssim = M.ssim(x, val["images"].repeat(len(points), 1, 1, 1))
        for j, p in enumerate(points):
            rows.append({"task": task, "method": method, **p, "val_ssim": float(ssim[j * n:(j + 1) * n].mean())})
    best = max(rows, key=lambda r: r["val_ssim"])
    return {k: best[k] for k in grid[0]}, rows


def tuning_figure(task, rows):
    """Validation SSIM against ρ per method (other axes at their best value): where each curve turns over."""
    import matplotlib.pyplot as plt

    df = pd.DataFrame(rows)
    fig, ax = plt.subplots(figsize=(4.8, 3))
    for i, (m, d) in enumerate(df.groupby("method", sort=False)):
        curve = d.groupby("rho")["val_ssim"].max()
        ax.plot(curve.index, curve.values, marker="o", ms=3, color=f"C{i}", label=m)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("ρ")
    ax.set_ylabel("validation SSIM")
    ax.set_title(f"Tuning, {TASK_NAMES.get(task, task)}", fontsize=9)
    ax.legend(fontsize=6)
    fig.tight_layout()
    return fig


def edge_flags(best: dict, rows: list[dict]) -> dict:
    """Per tuned axis, whether the chosen value lies at an edge of the grid that was tried (a grid with
    one value is its own edge): where the grid should be extended."""
    return {k: bool(v in (min(r[k] for r in rows), max(r[k] for r in rows))) for k, v in best.items()}
