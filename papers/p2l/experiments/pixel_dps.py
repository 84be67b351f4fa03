"""The pixel-space comparison: train_pixel_prior (prior k from seed + k, the latent priors' outer unit)
and pixel_dps, DPS with that prior on the main table's test problems (operators, images, noise), its ζ
tuned on the same validation images under the same budget (`tuning.budget` points, edge extension)."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from shared.io import read_json
from shared.samples import combine

from .. import metrics as M
from ..pixel_dps import dps
from ..pixel_prior import build_pixel_scheduler, load_pixel_prior, n_parameters, save_pixel_prior
from .problems import (TASK_NAMES, _prior_dir, cell, grouped_by_prior, held_out_problem, load_images, n_priors,
                       per_image_mean, replica_dir, replica_training)
from .tuning import _beyond, edge_flags

METHODS = ("p2l", "psld", "ldps")   # the latent solvers the table sets beside DPS (read from main_<task>)


def _pixel_dir(out: Path, prior: int = 0) -> Path:
    return replica_dir(out, "train_pixel_prior", prior)


def train_pixel_prior_job(run, prior: int = 0) -> dict:
    """Pixel prior k (seed + k) on the latent prior's training images, at the LDM's steps and batch size."""
    cfg = run.cfg
    if cfg.full.sd_path:
        return {"skipped": "full profile: the pixel comparison is the tiny world's"}
    from ..pixel_prior import train_pixel_prior

    start = time.perf_counter()
    seed, tag, data = replica_training(run, prior)
    unet = train_pixel_prior(cfg.pixel, cfg.ldm, data["images"], run.checkpoint_dir(f"pixel{tag}"), seed)
    save_pixel_prior(unet, _pixel_dir(run.out, prior) / "unet")
    return {"prior": prior, "seed": seed, "parameters": n_parameters(unet), "steps": int(cfg.ldm.steps),
            "batch_size": int(cfg.ldm.batch_size), "train_wall_s": time.perf_counter() - start}


def zeta_points(cfg) -> list[float]:
    """The ζ values of the tuning draw: the grid whole where it fits the budget, else `budget` values
    evenly spaced along it (its edges included)."""
    grid = [float(v) for v in cfg.pixel.zeta]
    budget = int(cfg.tuning.get("budget") or 0)
    if not budget or len(grid) <= budget:
        return grid
    return [grid[int(round(i))] for i in np.linspace(0, len(grid) - 1, budget)]


def _evaluate(cfg, unet, sched, op, val, seed, zetas, task, stage) -> list[dict]:
    y = op.measure(val["images"], seed)
    n = len(val["images"])
    k = len(zetas)
    x = dps(unet, sched, op, y.repeat(k, *[1] * (y.dim() - 1)), cfg.solve.steps,
            np.repeat(np.asarray(zetas, dtype=np.float32), n), seed, repeats=k).x
    truth = val["images"].repeat(k, 1, 1, 1)
    ssim, psnr = M.ssim(x, truth), M.psnr(x, truth)
    return [{"task": task, "method": "dps", "zeta": z, "stage": stage, "n_val": n,
             "val_ssim": float(ssim[j * n:(j + 1) * n].mean()), "val_psnr": float(psnr[j * n:(j + 1) * n].mean())}
            for j, z in enumerate(zetas)]


def tune_zeta(cfg, unet, sched, op, val, seed, task) -> tuple[dict, list[dict]]:
    """As `tuning.tune`: the draw, best mean validation SSIM, then up to `tuning.extend` rounds past an
    edge while that improves it."""
    rows = _evaluate(cfg, unet, sched, op, val, seed, zeta_points(cfg), task, "draw")
    for _ in range(int(cfg.tuning.get("extend", 0) or 0)):
        best = max(rows, key=lambda r: r["val_ssim"])
        v = _beyond(sorted({r["zeta"] for r in rows}), best["zeta"], "zeta")
        if v is None:
            break
        more = _evaluate(cfg, unet, sched, op, val, seed, [v], task, "extend")
        rows += more
        if more[0]["val_ssim"] <= best["val_ssim"]:
            break
    best = max(rows, key=lambda r: r["val_ssim"])
    return {"zeta": best["zeta"]}, rows


def latent_parameters(cfg, out) -> dict:
    """The latent prior's parameter counts (prior 0's pipeline), for the budget comparison."""
    from .problems import load_prior

    ldm = load_prior(cfg, out, 0)
    counts = {"unet": n_parameters(ldm.unet), "text_encoder": n_parameters(ldm.text_encoder), "vae": n_parameters(ldm.vae)}
    counts["total"] = sum(counts.values())
    return counts


def pixel_dps(run) -> dict:
    """Per task and pixel prior: ζ tuned on the validation images, then DPS on the held-out problems;
    per-image SSIM and PSNR grouped by prior, paired with the latent solvers of main_<task> (which pair
    prior k with latent prior k, image by image)."""
    cfg = run.cfg
    if cfg.full.sd_path:
        return {"skipped": "full profile: the pixel comparison is the tiny world's"}
    P = n_priors(cfg)
    sched = build_pixel_scheduler()
    unets = [load_pixel_prior(_pixel_dir(run.out, p) / "unet") for p in range(P)]
    val = load_images(cfg, "val", cfg.data.n_val)
    tasks, table, tuning_rows, per_image = {}, [], [], []
    k = int(cfg.data.noise_seeds)
    for task in cfg.main_tasks:
        op, test, y = held_out_problem(cfg, task, run.seed)
        gt = test["images"]
        scores, tuned, edges, wall = [], [], [], []
        for prior, unet in enumerate(unets):
            best, rows = tune_zeta(cfg, unet, sched, op, val, run.seed + 1, task)
            tuning_rows += [{"prior": prior, **r} for r in rows]
            sol = dps(unet, sched, op, y, cfg.solve.steps, best["zeta"], run.seed)
            s = {"psnr": M.psnr(sol.x, gt), "ssim": M.ssim(sol.x, gt)}
            scores.append(s)
            tuned.append(best)
            edges.append(edge_flags(best, rows))
            wall.append(sol.wall_s)
            per_image += [{"task": task, "prior": prior, "image": i % cfg.data.n_test, "noise_seed": i // cfg.data.n_test,
                           **{m: float(v[i]) for m, v in s.items()}} for i in range(len(gt))]
        res = {m: grouped_by_prior([per_image_mean(s[m], k) for s in scores], P) for m in ("ssim", "psnr")}
        res.update(zeta=tuned[0]["zeta"], tuned_by_prior=tuned, tuned_at_edge_by_prior=edges,
                   tuning_evaluations=len(rows) * len(val["images"]), nfe=sol.nfe, wall_s=float(np.mean(wall)))
        main = read_json(Path(run.out) / "metrics" / f"main_{task}.json")["methods"]
        entry = {"dps": res}
        entry["p2l_minus_dps"] = {m: combine([main["p2l"][m], res[m]], lambda u, w: u - w) for m in ("ssim", "psnr")}
        tasks[task] = entry
        for m in ("ssim", "psnr"):
            row = {"task": TASK_NAMES.get(task, task), "metric": m.upper()}
            row.update({meth.upper(): cell(main[meth][m]) for meth in METHODS if meth in main})
            row["DPS (pixel)"] = cell(res[m])
            row["DPS ζ"] = "; ".join(f"{t['zeta']:g}" + (" (edge)" if e["zeta"] else "") for t, e in zip(tuned, edges))
            table.append(row)
    run.save_table(pd.DataFrame(table), "pixel_dps")
    run.save_table(pd.DataFrame(tuning_rows), "pixel_dps_tuning")
    run.save_table(pd.DataFrame(per_image), "pixel_dps_per_image")
    pixel_params = n_parameters(unets[0])
    latent = latent_parameters(cfg, run.out)
    return {"tasks": tasks, "priors": P, "steps": int(cfg.solve.steps), "n_val": len(val["images"]),
            "tuning_budget": int(cfg.tuning.get("budget") or 0),
            "parameters": {"pixel_unet": pixel_params, "latent": latent,
                           "pixel_over_latent_unet": pixel_params / latent["unet"]},
            "training": {"steps": int(cfg.ldm.steps), "batch_size": int(cfg.ldm.batch_size)}}
