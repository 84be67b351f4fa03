"""floors: prior-free reference arms on the main table's test images and noise."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from shared.io import read_json
from shared.samples import sample

from .. import metrics as M
from ..operators import Inpainting
from ..solver import hparams_of, proximal
from .problems import TASK_NAMES, cell, held_out_problem, method_hparams, per_image_mean


FLOOR_ARMS = ("measurement", "least_squares")
FLOOR_COMPARED = ("p2l", "psld", "ldps")     # the methods whose SSIM the floors table shows beside the floors


def measurement_image(op, y: torch.Tensor) -> torch.Tensor:
    """The measurement itself on the image grid, no prior: Aᵖy, the "measurement" column of the grid
    figures. A⁺y for SR (nearest upsampling, the exact pseudo-inverse of average pooling) and inpainting
    (m ⊙ y: the mask is its own pseudo-inverse); Aᵀy for deblurring, where A⁺y is an unregularised
    deconvolution. Aᵀy scores higher SSIM than y itself here (AᵀA's kernel is symmetric, so it undoes
    the motion kernel's shift), which makes it the sterner floor."""
    return op.pseudo_adjoint(y)


def least_squares_image(op, y: torch.Tensor, lam: float, cg_iters: int) -> torch.Tensor:
    """P2L's proximal data-consistency solve (`solver.proximal`: CG on (AᵀA + λI)x = Aᵀy + λx̄, or the
    inpainting closed form) with x̄ = 0 and started from zero: least squares with no prior."""
    return proximal(y, op, torch.zeros_like(op.adjoint(y)), lam, cg_iters)


def floor_images(cfg, task: str, seed: int) -> tuple:
    """(operator, ground truth, y, {arm: reconstruction}) on the main table's test images and noise, with
    P2L's λ and CG iterations (`hparams.p2l`). The arms are clamped to [-1, 1], as every solver's output is."""
    op, test, y = held_out_problem(cfg, task, seed)
    hp = hparams_of("p2l", **method_hparams(cfg, "p2l"))
    arms = {"measurement": measurement_image(op, y),
            "least_squares": least_squares_image(op, y, hp["lam"], hp["cg_iters"])}
    return op, test["images"], y, {k: v.clamp(-1, 1) for k, v in arms.items()}


def least_squares_solve(op, lam: float, cg_iters: int) -> str:
    """How `least_squares_image` solves for this operator, in words (as `solver.proximal` decides)."""
    if isinstance(op, Inpainting):
        return f"closed form, λ = {lam:g}"
    return f"CG, {cg_iters} iterations, λ = {lam:g}"


def _gap(a: dict, b: dict) -> str:
    """The paired per-image gap a − b: its mean and 90 % interval (the ledger's)."""
    from shared.intervals import mean_interval

    d = np.asarray(a["values"]) - np.asarray(b["values"])
    lo, hi, _ = mean_interval(d)
    return f"{d.mean():+.3f} [{lo:+.3f}, {hi:+.3f}]"


def floors(run) -> dict:
    """Both floors per task, with the SSIM of P2L, PSLD and LDPS from the main table beside them, and
    every method's paired gap to each floor (`tables/floors_standing`: reported, not claimed)."""
    cfg = run.cfg
    parts = {t: read_json(p) for t in cfg.main_tasks
             if (p := Path(run.out) / "metrics" / f"main_{t}.json").is_file()}
    hp = hparams_of("p2l", **method_hparams(cfg, "p2l"))
    out, rows, standing = {}, [], []
    for task in cfg.main_tasks:
        op, gt, y, arms = floor_images(cfg, task, run.seed)
        k = int(cfg.data.noise_seeds)   # per image, the mean over its noise draws (as in main_task)
        out[task] = {arm: {key: sample(per_image_mean(v, k), "image") for key, v in
                           (("ssim", M.ssim(x, gt)), ("psnr", M.psnr(x, gt)),
                            ("residual", M.per_image_residual(op, x, y)))} for arm, x in arms.items()}
        out[task]["least_squares_solve"] = least_squares_solve(op, hp["lam"], hp["cg_iters"])
        row = {"task": TASK_NAMES.get(task, task), "n": len(gt) // k, "noise draws": k}
        for arm in FLOOR_ARMS:
            row.update({f"{arm} ssim": cell(out[task][arm]["ssim"]), f"{arm} psnr": cell(out[task][arm]["psnr"])})
        row["least_squares solve"] = out[task]["least_squares_solve"]
        methods = parts[task]["methods"] if task in parts else {}
        row.update({f"{m} ssim": cell(methods[m]["ssim"]) for m in FLOOR_COMPARED if m in methods})
        rows.append(row)
        for m, r in methods.items():
            standing.append({"task": TASK_NAMES.get(task, task), "method": m, "ssim": cell(r["ssim"]),
                             **{f"ssim − {arm}": _gap(r["ssim"], out[task][arm]["ssim"]) for arm in FLOOR_ARMS}})
    run.save_table(pd.DataFrame(rows), "floors")
    run.save_table(pd.DataFrame(standing, columns=["task", "method", "ssim",
                                                   *[f"ssim − {arm}" for arm in FLOOR_ARMS]]), "floors_standing")
    beats = {task: beats_both_floors(parts[task]["methods"]["p2l"]["ssim"], out[task])
             for task in cfg.main_tasks if task in parts and "p2l" in parts[task]["methods"]}
    return {"tasks": out, "lam": hp["lam"], "cg_iters": hp["cg_iters"], "n_test": cfg.data.n_test,
            "p2l_beats_both_floors": beats, "p2l_tasks_beating_both_floors": int(sum(beats.values()))}


def beats_both_floors(method_ssim: dict, floors_of_task: dict) -> bool:
    """Whether the paired per-image SSIM gap to each floor has its whole 90 % interval above 0 (the
    ledger's PASS for `>` against that floor)."""
    from shared.intervals import mean_interval

    for arm in FLOOR_ARMS:
        d = np.asarray(method_ssim["values"]) - np.asarray(floors_of_task[arm]["ssim"]["values"])
        if len(d) < 3 or not mean_interval(d)[0] > 0:
            return False
    return True
