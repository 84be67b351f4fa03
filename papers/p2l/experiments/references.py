"""floors: the references on the main table's test images and noise.

Floors (no learned prior): the measurement itself (Aᵖy), least squares (P2L's own data-consistency
solve from zero) and the strongest classical solver of the task (`classical.solvers_for`: bicubic,
Lanczos, Tikhonov, TV for SR; Tikhonov, TV for the deblurs; biharmonic, TV for inpainting), chosen with
its parameter on `references.n_val` validation images, once per decision metric (SSIM, PSNR). A grid
whose best value is at an edge is extended (`references.extend` times at most) and the edge flag kept.
Ceilings (diagnostic): the VAE round trip D(E(x)) of the ground truth and the best fit of the world's
own generator to the measurement (tiny world only)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from shared.io import read_json
from shared.samples import is_sample, sample

from .. import classical as CL
from .. import metrics as M
from .comparison_figure import main_comparison_figure
from ..operators import Inpainting
from ..solver import hparams_of, proximal
from .problems import (TASK_NAMES, cell, held_out_problem, load_images, load_prior, method_hparams, n_priors,
                       per_image_mean)


FLOOR_ARMS = ("measurement", "least_squares")
METRICS = ("ssim", "psnr")                      # the decision metrics; the classical floor is chosen per metric
FLOOR_COMPARED = ("p2l", "psld", "ldps")     # the methods the floors table shows beside the floors
CEILINGS = ("vae_round_trip", "generator_fit")   # diagnostic: what the prior and the world allow


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
    from shared.intervals import group_means, mean_interval

    d = np.asarray(a["values"]) - np.asarray(b["values"])
    if "groups" in a and "groups" in b:   # over the priors' means
        d = np.asarray(group_means(d, a["groups"])[1])
    if len(d) < 2:
        return f"{d.mean():+.3f}"
    lo, hi, _ = mean_interval(d)
    return f"{d.mean():+.3f} [{lo:+.3f}, {hi:+.3f}]"


def floors(run) -> dict:
    """Every floor and ceiling per task, on the test images and noise of the main table, scored per image
    on SSIM and PSNR; beside them the main table's P2L, PSLD and LDPS (`tables/floors`, per metric), and
    every method's paired gap to each floor (`tables/floors_standing`: reported, not claimed)."""
    cfg = run.cfg
    parts = {t: read_json(p) for t in cfg.main_tasks
             if (p := Path(run.out) / "metrics" / f"main_{t}.json").is_file()}
    hp = hparams_of("p2l", **method_hparams(cfg, "p2l"))
    n_val = int(cfg.references.n_val) if not cfg.full.images_path else min(int(cfg.references.n_val), cfg.data.n_val)
    val = load_images(cfg, "val", n_val)["images"]
    out, rows, standing, search_rows = {}, [], [], []
    for task in cfg.main_tasks:
        op, gt, y, arms = floor_images(cfg, task, run.seed)
        k = int(cfg.data.noise_seeds)   # per image, the mean over its noise draws (as in main_task)
        out[task] = {arm: {key: sample(per_image_mean(v, k), "image") for key, v in
                           (("ssim", M.ssim(x, gt)), ("psnr", M.psnr(x, gt)),
                            ("residual", M.per_image_residual(op, x, y)))} for arm, x in arms.items()}
        out[task]["least_squares_solve"] = least_squares_solve(op, hp["lam"], hp["cg_iters"])
        # the classical floor: chosen on the validation images (their own noise, seeded as the tuning's)
        choice, srows = classical_search(cfg, op, val, run.seed + 1)
        search_rows += [{"task": task, **r, "value": "" if r["value"] is None else f"{r['value']:.3g}",
                         "edge": "edge" if r.get("edge") else ""} for r in srows]
        out[task]["classical"] = {"chosen": choice}
        for m in METRICS:
            x = _solve_classical(choice[m]["solver"], y, op, choice[m]["value"], cfg.references)
            out[task]["classical"][m] = sample(_score(x, gt, k)[m], "image")
        for name, s in ceilings(cfg, run.out, op, gt, y, k).items():
            out[task][name] = {m: sample(s[m], "image") for m in METRICS}
        out[task] = _over_priors(out[task], n_priors(cfg))
        methods = parts[task]["methods"] if task in parts else {}
        for m in METRICS:
            row = {"task": TASK_NAMES.get(task, task), "metric": m, "n": len(gt) // k}
            row.update({arm: cell(out[task][arm][m]) for arm in (*FLOOR_ARMS, "classical")})
            row["classical solver"] = classical_label(choice[m])
            row.update({meth: cell(methods[meth][m]) for meth in FLOOR_COMPARED if meth in methods and m in methods[meth]})
            row.update({c: cell(out[task][c][m]) for c in CEILINGS if c in out[task]})
            rows.append(row)
        for meth, r in methods.items():
            for m in METRICS:
                if m in r:
                    standing.append({"task": TASK_NAMES.get(task, task), "method": meth, "metric": m,
                                     "value": cell(r[m]), **{f"− {arm}": _gap(r[m], out[task][arm][m])
                                                            for arm in (*FLOOR_ARMS, "classical")}})
    run.save_table(pd.DataFrame(rows), "floors")
    run.save_table(pd.DataFrame(standing, columns=["task", "method", "metric", "value",
                                                   *[f"− {arm}" for arm in (*FLOOR_ARMS, "classical")]]),
                   "floors_standing")
    run.save_table(pd.DataFrame(search_rows), "floors_tuning")
    run.save_figure(main_comparison_figure(parts, out), "main_comparison")
    beats = {task: beats_both_floors(parts[task]["methods"]["p2l"]["ssim"], out[task])
             for task in cfg.main_tasks if task in parts and "p2l" in parts[task]["methods"]}
    above = {m: {task: beats_floor(parts[task]["methods"]["p2l"][m], out[task]["classical"][m])
                 for task in cfg.main_tasks if task in parts and m in parts[task]["methods"].get("p2l", {})}
             for m in METRICS}
    return {"tasks": out, "lam": hp["lam"], "cg_iters": hp["cg_iters"], "n_test": cfg.data.n_test, "n_val": n_val,
            "p2l_beats_both_floors": beats, "p2l_tasks_beating_both_floors": int(sum(beats.values())),
            "p2l_beats_classical": above,
            "p2l_tasks_beating_classical": {m: int(sum(v.values())) for m, v in above.items()}}


def _over_priors(node, priors: int):
    """The floors' per-image samples repeated once per prior and grouped by prior, as the main table's
    methods are, so that a method pairs with its floor by (prior, image). The prior-free arms are the
    same for every prior; the ceilings use the first prior's autoencoder."""
    if priors == 1:
        return node
    if is_sample(node) and node["unit"] == "image":
        return sample(list(node["values"]) * priors, "image", groups=[g for g in range(priors) for _ in node["values"]],
                      group_unit="prior")
    if isinstance(node, dict):
        return {key: _over_priors(v, priors) for key, v in node.items()}
    return node


def _gap_above_zero(a: dict, b: dict) -> bool:
    """Whether the paired gap a − b has its whole 90 % interval above 0 (the ledger's rule: on the
    per-prior means of a grouped sample, n = the priors; else on the images)."""
    from shared.intervals import group_means, mean_interval

    d = np.asarray(a["values"]) - np.asarray(b["values"])
    if "groups" in a:
        d = np.asarray(group_means(d, a["groups"])[1])
    return bool(len(d) >= 3 and mean_interval(d)[0] > 0)


def beats_floor(method: dict, floor: dict) -> bool:
    """Whether the paired per-image gap method − floor has its whole 90 % interval above 0."""
    return _gap_above_zero(method, floor)


def beats_both_floors(method_ssim: dict, floors_of_task: dict) -> bool:
    """Whether the paired per-image SSIM gap to each floor has its whole 90 % interval above 0 (the
    ledger's PASS for `>` against that floor)."""
    return all(_gap_above_zero(method_ssim, floors_of_task[arm]["ssim"]) for arm in FLOOR_ARMS)


# ------------------------------------------------------------------------------- classical floors
def _solve_classical(name: str, y, op, value, ref) -> torch.Tensor:
    fn, param = CL.SOLVERS[name]
    if name == "tv":
        return fn(y, op, value, steps=int(ref.tv_steps))
    if name == "tikhonov":
        return fn(y, op, value, cg_iters=int(ref.cg_iters))
    return fn(y, op)


PSNR_CAP = 60.0   # dB: the generator's fit can reproduce an image exactly (its coverage is quantised), PSNR = ∞


def _score(x, gt, k: int = 1) -> dict:
    return {"ssim": per_image_mean(M.ssim(x, gt), k), "psnr": per_image_mean(np.minimum(M.psnr(x, gt), PSNR_CAP), k)}


def classical_search(cfg, op, val: torch.Tensor, seed: int) -> tuple[dict, list[dict]]:
    """Every classical solver of the task on the validation images (measured with `seed`), its parameter
    over its grid (`references.grid.<param>`, one batch per grid); a best value at the grid's edge
    extends the grid geometrically, up to `references.extend` times. Returns ({metric: choice}, rows):
    a choice is {solver, param, value, val, edge} with edge true when the best value is still at an edge."""
    ref = cfg.references
    y = op.measure(val, seed)
    n = len(val)
    rows = []
    for name in CL.solvers_for(op):
        _, param = CL.SOLVERS[name]
        if param is None:
            s = _score(_solve_classical(name, y, op, None, ref), val)
            rows.append({"solver": name, "param": None, "value": None, **{m: float(s[m].mean()) for m in METRICS}})
            continue
        grid = sorted(float(v) for v in ref.grid[param])
        seen = {}
        for _ in range(int(ref.extend) + 1):
            todo = [v for v in grid if v not in seen]
            if todo:
                vals = torch.tensor([v for v in todo for _ in range(n)])
                x = _solve_classical(name, y.repeat(len(todo), *[1] * (y.dim() - 1)), op, vals, ref)
                s = _score(x, val.repeat(len(todo), 1, 1, 1))
                for j, v in enumerate(todo):
                    seen[v] = {m: float(s[m][j * n:(j + 1) * n].mean()) for m in METRICS}
            # extend at the edge where either metric's best lies (a grid is shared by both metrics)
            ratio = grid[1] / grid[0]
            best = {m: max(seen, key=lambda v: seen[v][m]) for m in METRICS}
            lo, hi = any(b == grid[0] for b in best.values()), any(b == grid[-1] for b in best.values())
            if not (lo or hi):
                break
            grid = ([grid[0] / ratio] if lo else []) + grid + ([grid[-1] * ratio] if hi else [])
        edges = (min(seen), max(seen))
        rows += [{"solver": name, "param": param, "value": v, **seen[v], "edge": v in edges} for v in sorted(seen)]
    choice = {}
    for m in METRICS:
        best = max(rows, key=lambda r: r[m])
        choice[m] = {"solver": best["solver"], "param": best["param"], "value": best["value"], "val": best[m],
                     "edge": bool(best.get("edge", False))}
    return choice, rows


def classical_label(choice: dict) -> str:
    return choice["solver"] if choice["param"] is None else \
        f"{choice['solver']} ({choice['param']} = {choice['value']:.3g}{', at edge' if choice['edge'] else ''})"


def ceilings(cfg, out: Path, op, gt_images: torch.Tensor, y: torch.Tensor, k: int) -> dict:
    """The VAE round trip D(E(x)) of each test image, and (tiny world) the generator's best fit to each
    measurement, per image (averaged over the noise draws)."""
    res = {}
    ldm = load_prior(cfg, out)
    bs = int(cfg.solve.batch_size)
    with torch.no_grad():
        rec = torch.cat([ldm.decode(ldm.encode(gt_images[b:b + bs].to(ldm.device))).cpu()
                         for b in range(0, len(gt_images), bs)]).clamp(-1, 1)
    res["vae_round_trip"] = _score(rec, gt_images, k)
    if not cfg.full.images_path:
        bank = CL.templates(cfg.image_size)
        res["generator_fit"] = _score(CL.generator_fit(y, op, bank), gt_images, k)
    return res
