"""severity_knob: the SR factor as a knob (how much the measurement hides), LDPS and P2L at each factor.

At each factor both methods are tuned again on the validation split with the main table's equal-budget
grid (`tuning.tune`), then solve the first `knob.n` test images under the first noise draw. At the main
table's own factor the tuning is the one `main_<task>` already ran on prior 0 (the same operator,
validation images and seed), so its chosen values and rows are read, not run again. The per-image
samples at the factors pair by image (the same images, noise seed and initial latents), so the ledger can
test that P2L's gain over LDPS grows with the factor (a per-image slope along the knob).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from shared.assets import MissingAssetError
from shared.io import read_json
from shared.samples import combine, knob, sample

from .. import metrics as M
from ..operators import build_operator
from .problems import _solve_batches, cell, load_images, load_prior, method_hparams
from .tuning import tune

KNOB_METRICS = ("ssim", "psnr")


def main_tuning(cfg, out, task: str, factor: int) -> dict | None:
    """What `main_<task>` tuned on prior 0, per method ({method: (tuned, rows)}), where the knob's factor
    is the main table's own for that task; else None."""
    if task not in cfg.main_tasks or int(cfg.tasks[task].get("factor", 0)) != factor:
        return None
    path = Path(out) / "metrics" / f"main_{task}.json"
    if not path.is_file():
        raise MissingAssetError(f"No {path}: the severity knob reads main_{task}'s tuning at factor {factor}; "
                                f"run `python -m papers.p2l main_{task} --out {out}` first (same profile).")
    methods = read_json(path)["methods"]
    table = pd.read_csv(Path(out) / "tables" / f"tuning_{task}.csv")
    table = table[table["prior"] == 0].drop(columns="prior")
    return {m: ({k: float(v) for k, v in methods[m]["tuned_by_prior"][0].items()},
                [{k: v for k, v in r.items() if not pd.isna(v)} for r in table[table["method"] == m].to_dict("records")])
            for m in methods}


def severity_knob(run) -> dict:
    cfg = run.cfg
    kc = cfg.knob
    ldm = load_prior(cfg, run.out)
    n = min(int(kc.n), cfg.data.n_test)
    test = load_images(cfg, "test", n)
    val = load_images(cfg, "val", cfg.data.n_val)
    gt = test["images"]
    per = {m: {k: [] for k in KNOB_METRICS} for m in kc.methods}
    rows, tuned_rows = [], []
    factors = [int(f) for f in kc.factors]
    for f in factors:
        op = build_operator(kc.task, cfg.image_size, sigma_y=cfg.solve.sigma_y, seed=cfg.seed,
                            **{**dict(cfg.tasks[kc.task]), "factor": f})
        y = op.measure(gt, run.seed)    # the main table's first noise draw, at this factor
        done = main_tuning(cfg, run.out, kc.task, f)
        for m in kc.methods:
            tuned, trows = done[m] if done else tune(cfg, m, kc.task, op, ldm, val, run.seed + 1)
            tuned_rows += [{**r, "factor": f} for r in trows]
            hp = {**method_hparams(cfg, m), **tuned}
            x, *_ = _solve_batches(m, y, op, ldm, cfg, run.seed, test["captions"], **hp)
            s = {"ssim": sample(M.ssim(x, gt), "image"), "psnr": sample(M.psnr(x, gt), "image")}
            for k in KNOB_METRICS:
                per[m][k].append(s[k])
            rows.append({"factor": f, "method": m, "n": n, **{k: cell(s[k]) for k in KNOB_METRICS},
                         **{f"tuned {k}": v for k, v in tuned.items()}})
    out = {m: {k: knob("sr_factor", factors, per[m][k]) for k in KNOB_METRICS} for m in kc.methods}
    a, b = kc.methods[-1], kc.methods[0]   # P2L's gain over LDPS at each factor
    out["gain"] = {k: knob("sr_factor", factors, [combine([u, v], lambda p, q: p - q)
                                                  for u, v in zip(per[a][k], per[b][k])]) for k in KNOB_METRICS}
    gain = {f: s["mean"] for f, s in zip(factors, out["gain"]["ssim"]["samples"])}
    for r in rows:
        r["gain ssim"] = f"{gain[r['factor']]:+.3f}" if r["method"] == a else ""
    run.save_table(pd.DataFrame(rows), "severity_knob")
    run.save_table(pd.DataFrame(tuned_rows), "severity_knob_tuning")
    return {"task": kc.task, "factors": factors, "n": n, "methods": out, "gain_of": f"{a} − {b}"}
