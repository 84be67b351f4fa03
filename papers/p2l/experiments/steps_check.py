"""steps_check: the main table's ranking again at more DDIM steps on one task."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from shared.io import read_json
from shared.samples import sample

from .. import metrics as M
from .problems import TASK_NAMES, _solve_batches, cell, held_out_problem, load_prior, method_hparams


def steps_check(run) -> dict:
    """The main table's ranking again at `steps_check.steps` DDIM steps on one task: the methods at their
    tuned hyper-parameters (from the main table, tuned at solve.steps) on the first noise draw of the
    same test images. Per-image SSIM, paired by image."""
    cfg = run.cfg
    chk = cfg.steps_check
    task = chk.task
    tuned = read_json(Path(run.out) / "metrics" / f"main_{task}.json")["methods"]
    ldm = load_prior(cfg, run.out)
    op, test, y = held_out_problem(cfg, task, run.seed)
    n = min(int(chk.n), cfg.data.n_test)   # the first n images, first noise draw (cost)
    gt, y, caps = test["images"][:n], y[:n], None if test["captions"] is None else test["captions"][:n]
    out, rows = {}, []
    for m in chk.methods:
        hp = {**method_hparams(cfg, m), **tuned[m]["tuned"]}
        x, nfe, wall, *_ = _solve_batches(m, y, op, ldm, _with_steps(cfg, int(chk.steps)), run.seed, caps, **hp)
        out[m] = {"ssim": sample(M.ssim(x, gt), "image"), "psnr": sample(M.psnr(x, gt), "image"), "nfe": nfe}
        short = np.asarray(tuned[m]["first_draw"]["ssim"]["values"][:n])   # the same images and noise draw
        rows.append({"task": TASK_NAMES.get(task, task), "method": m, "n": n,
                     f"ssim at {cfg.solve.steps} steps": f"{short.mean():.3f}",
                     f"ssim at {chk.steps} steps": cell(out[m]["ssim"]), "nfe": nfe})
    run.save_table(pd.DataFrame(rows), "steps_check")
    return {"task": task, "steps": int(chk.steps), "methods": out}


def _with_steps(cfg, steps: int):
    """A view of cfg with solve.steps replaced (what `_solve_batches` reads)."""
    from types import SimpleNamespace

    return SimpleNamespace(solve=SimpleNamespace(steps=steps, batch_size=cfg.solve.batch_size))
