"""The equal-budget tuning grid and its search on the validation split."""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from .. import metrics as M
from .problems import TASK_NAMES, VECTOR_HPARAMS, _solve_batches, method_hparams


INTEGER_AXES = ("tau", "prompt_steps")   # tuned axes whose values are counts (rounded when a grid is extended)


def tuning_axes(cfg, method: str | None) -> dict[str, list[float]]:
    """ρ (every method) and the method's own axes (`tuning.extra.<method>`: PSLD's γ; P2L's prompt_lr,
    τ, λ and K = prompt_steps; the oracle's τ and λ)."""
    extra = dict((cfg.tuning.get("extra", {}) or {}).get(method, {}) or {}) if method else {}
    return {"rho": [float(v) for v in cfg.tuning.rho], **{k: [float(x) for x in v] for k, v in extra.items()}}


def tuning_grid(cfg, method: str | None) -> list[dict]:
    """The product of the method's tuning axes (`tuning_axes`)."""
    import itertools

    axes = tuning_axes(cfg, method)
    return [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]


def tuning_points(cfg, method: str | None, budget: int | None = None) -> list[dict]:
    """The points a method evaluates on the validation images: the same number for every method
    (`tuning.budget`, the equal budget). A method whose product grid is no larger takes it whole; a
    larger one takes a Latin-hypercube draw of `budget` points (each axis's values equally often, ±1,
    in an order shuffled per axis and method, seeded by `seed`), so every value of every axis is tried."""
    budget = int(budget if budget is not None else (cfg.tuning.get("budget") or 0))
    grid = tuning_grid(cfg, method)
    if not budget or len(grid) <= budget:
        return grid
    import zlib

    rng = np.random.default_rng([int(cfg.seed), zlib.crc32(str(method).encode())])
    axes = tuning_axes(cfg, method)
    cols = {}
    for k, values in axes.items():
        reps = -(-budget // len(values))
        cols[k] = rng.permutation(np.tile(values, reps)[:budget] if len(values) < budget else
                                  rng.choice(values, budget, replace=False))
    return [{k: float(cols[k][j]) for k in axes} for j in range(budget)]


def _evaluate(cfg, method, task, op, ldm, val, seed, points, base, stage) -> list[dict]:
    """Validation SSIM and PSNR of each point; points that differ only in vector hyper-parameters (ρ, γ,
    prompt_lr, τ, λ) are solved as one batch (per-image values, the same z_T per image)."""
    y = op.measure(val["images"], seed)
    n = len(val["images"])
    groups = {}
    for point in points:
        key = tuple((k, v) for k, v in point.items() if k not in VECTOR_HPARAMS)
        groups.setdefault(key, []).append(point)
    rows = []
    for key, pts in groups.items():
        hp = {**method_hparams(cfg, method), **(base or {}),
              **{k: (int(round(v)) if k in INTEGER_AXES else v) for k, v in key}}
        for k in VECTOR_HPARAMS:
            if k in pts[0]:
                hp[k] = torch.tensor([p[k] for p in pts for _ in range(n)], dtype=torch.float32)
        caps = None if val["captions"] is None else list(val["captions"]) * len(pts)
        x, *_ = _solve_batches(method, y.repeat(len(pts), *[1] * (y.dim() - 1)), op, ldm, cfg, seed, caps,
                               repeats=len(pts), **hp)
        truth = val["images"].repeat(len(pts), 1, 1, 1)
        ssim, psnr = M.ssim(x, truth), M.psnr(x, truth)
        for j, p in enumerate(pts):
            rows.append({"task": task, "method": method, **p, "stage": stage, "n_val": n,
                         "val_ssim": float(ssim[j * n:(j + 1) * n].mean()),
                         "val_psnr": float(psnr[j * n:(j + 1) * n].mean())})
    return rows


def _beyond(tried: list[float], value: float, axis: str) -> float | None:
    """The next value past an edge of the values tried (the ratio of the two values nearest that edge),
    or None where there is no such value (a count below 1, a single value tried)."""
    if len(tried) < 2 or value not in (tried[0], tried[-1]):
        return None
    new = value / (tried[1] / tried[0]) if value == tried[0] else value * (tried[-1] / tried[-2])
    if axis in INTEGER_AXES:
        new = float(round(new))
        if new < 1 or new == value:
            return None
    return new


def tune(cfg, method, task, op, ldm, val, seed, base: dict | None = None,
         extra_axes: bool = True) -> tuple[dict, list[dict]]:
    """Equal budget: each method evaluates `tuning_points` (the same number for every method) on the
    same validation images and keeps the point of best mean SSIM; then, up to `tuning.extend` rounds, an
    axis whose best value lies at an edge of the values tried is extended one step past it (one point
    per such axis, the other axes at their best), while a new point beats the best SSIM outright. The
    rows (`stage` draw | extend) count every evaluation; `edge_flags` marks an edge still winning when
    the rounds ran out."""
    axes_of = method if extra_axes else None
    points = tuning_points(cfg, axes_of)
    rows = _evaluate(cfg, method, task, op, ldm, val, seed, points, base, "draw")
    keys = list(points[0])
    for _ in range(int(cfg.tuning.get("extend", 0) or 0)):
        best = max(rows, key=lambda r: r["val_ssim"])
        new = []
        for k in keys:
            v = _beyond(sorted({r[k] for r in rows}), best[k], k)
            if v is not None:
                new.append({**{j: best[j] for j in keys}, k: v})
        if not new:
            break
        more = _evaluate(cfg, method, task, op, ldm, val, seed, new, base, "extend")
        rows += more
        if max(r["val_ssim"] for r in more) <= best["val_ssim"]:
            break
    best = max(rows, key=lambda r: r["val_ssim"])
    return {k: best[k] for k in keys}, rows


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
    """Per tuned axis, whether the chosen value lies at an edge of the values tried that the grid could
    still be extended past (`_beyond`): where the extension rounds ran out while that edge kept winning.
    A grid with one value is its own edge; a count at 1 (K = 1, τ = 1) is a bound, not an edge."""
    def at_edge(k, v) -> bool:
        tried = sorted({r[k] for r in rows})
        return len(tried) < 2 or (v in (tried[0], tried[-1]) and _beyond(tried, v, k) is not None)

    return {k: at_edge(k, v) for k, v in best.items()}
