"""severity_knob: the SR factor as a knob (how much the measurement hides), LDPS and P2L at each factor.

At each factor both methods are tuned again on the validation split with the main table's equal-budget
grid (`tuning.tune`), then solve the first `knob.n` test images under the first noise draw. The per-image
samples at the factors pair by image (the same images, noise seed and initial latents), so the ledger can
test that P2L's gain over LDPS grows with the factor (a per-image slope along the knob).
"""
from __future__ import annotations

import pandas as pd

from shared.samples import combine, knob, sample

from .. import metrics as M
from ..operators import build_operator
from .problems import _solve_batches, cell, load_images, load_prior, method_hparams
from .tuning import tune

KNOB_METRICS = ("ssim", "psnr")


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
        for m in kc.methods:
            tuned, trows = tune(cfg, m, kc.task, op, ldm, val, run.seed + 1)
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
