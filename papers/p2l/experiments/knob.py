"""severity_knob: the SR factor as a knob (how much the measurement hides), LDPS and P2L at each factor,
on every prior.

Per prior, at each factor both methods are tuned again on the validation split with the main table's
equal-budget grid (`tuning.tune`), then solve the first `knob.n` test images under the first noise draw.
At the main table's own factor the tuning is the one `main_<task>` already ran on that prior (the same
operator, validation images and seed), so its chosen values, rows and test solves are read, not run again. The
per-image samples pair by (prior, image) along the knob (the same images, noise seed and initial latents)
and are grouped by prior, so the ledger tests that P2L's gain over LDPS grows with the factor by a
per-image slope whose interval is over the priors.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from shared.assets import MissingAssetError
from shared.io import read_json
from shared.samples import combine, knob

from .. import metrics as M
from ..operators import build_operator
from .problems import _solve_batches, cell, grouped_by_prior, load_images, load_prior, main_solves, method_hparams, n_priors
from .tuning import tune

KNOB_METRICS = ("ssim", "psnr")


def main_metrics(out, task: str, factor: int | None = None) -> dict:
    """main_<task>'s per-method metrics, which the knob reads at the main table's own factor."""
    path = Path(out) / "metrics" / f"main_{task}.json"
    if not path.is_file():
        raise MissingAssetError(f"No {path}: the severity knob reads main_{task}'s tuning and solves at factor "
                                f"{factor}; run `python -m papers.p2l main_{task} --out {out}` first (same profile).")
    return read_json(path)["methods"]


def is_main_factor(cfg, task: str, factor: int) -> bool:
    """Whether the knob's factor is the main table's own for that task."""
    return task in cfg.main_tasks and int(cfg.tasks[task].get("factor", 0)) == factor


def main_tuning(cfg, out, task: str, factor: int, prior: int, methods: dict) -> dict | None:
    """What `main_<task>` tuned on `prior`, per method ({method: (tuned, rows)}), where the knob's factor
    is the main table's own for that task; else None. `methods`: main_<task>'s metrics (`main_metrics`)."""
    if not is_main_factor(cfg, task, factor):
        return None
    table = pd.read_csv(Path(out) / "tables" / f"tuning_{task}.csv")
    table = table[table["prior"] == prior].drop(columns="prior")
    return {m: ({k: float(v) for k, v in methods[m]["tuned_by_prior"][prior].items()},
                [{k: v for k, v in r.items() if not pd.isna(v)} for r in table[table["method"] == m].to_dict("records")])
            for m in methods}


def severity_knob(run) -> dict:
    cfg = run.cfg
    kc = cfg.knob
    P = n_priors(cfg)
    n = min(int(kc.n), cfg.data.n_test)
    test = load_images(cfg, "test", n)
    val = load_images(cfg, "val", cfg.data.n_val)
    gt = test["images"]
    factors = [int(f) for f in kc.factors]
    # per method, metric and factor: the per-image values of each prior
    per = {m: {k: [[] for _ in factors] for k in KNOB_METRICS} for m in kc.methods}
    tuned_by = {(f, m): [] for f in factors for m in kc.methods}
    tuned_rows = []
    main = next((main_metrics(run.out, kc.task, f) for f in factors if is_main_factor(cfg, kc.task, f)), None)
    for prior in range(P):
        ldm = load_prior(cfg, run.out, prior)
        for j, f in enumerate(factors):
            op = build_operator(kc.task, cfg.image_size, sigma_y=cfg.solve.sigma_y, seed=cfg.seed,
                                **{**dict(cfg.tasks[kc.task]), "factor": f})
            y = op.measure(gt, run.seed)    # the main table's first noise draw, at this factor
            done = main_tuning(cfg, run.out, kc.task, f, prior, main)
            for m in kc.methods:
                tuned, trows = done[m] if done else tune(cfg, m, kc.task, op, ldm, val, run.seed + 1)
                tuned_rows += [{**r, "factor": f, "prior": prior} for r in trows]
                tuned_by[f, m].append(tuned)
                # at the main factor, the main table's own test solves (the same images, draw and seed)
                solved = main_solves(cfg, main, m, prior, n, KNOB_METRICS) if done else None
                if solved is None:
                    x, *_ = _solve_batches(m, y, op, ldm, cfg, run.seed, test["captions"], **{**method_hparams(cfg, m), **tuned})
                    solved = {"scores": {"ssim": M.ssim(x, gt), "psnr": M.psnr(x, gt)}}
                for k in KNOB_METRICS:
                    per[m][k][j].append(solved["scores"][k])
    grouped = {m: {k: [grouped_by_prior(v, P) for v in per[m][k]] for k in KNOB_METRICS} for m in kc.methods}
    out = {m: {k: knob("sr_factor", factors, grouped[m][k]) for k in KNOB_METRICS} for m in kc.methods}
    a, b = kc.methods[-1], kc.methods[0]   # P2L's gain over LDPS at each factor
    gains = {k: [combine([u, v], lambda p, q: p - q) for u, v in zip(grouped[a][k], grouped[b][k])] for k in KNOB_METRICS}
    out["gain"] = {k: knob("sr_factor", factors, gains[k]) for k in KNOB_METRICS}
    rows = []
    for j, f in enumerate(factors):
        for m in kc.methods:
            tuned = tuned_by[f, m]
            rows.append({"factor": f, "method": m, "n": n, "priors": P,
                         **{k: cell(grouped[m][k][j]) for k in KNOB_METRICS},
                         **{f"tuned {k}": " / ".join(f"{t[k]:g}" for t in tuned) for k in tuned[0]},
                         "gain ssim": f"{gains['ssim'][j]['mean']:+.3f}" if m == a else ""})
    run.save_table(pd.DataFrame(rows), "severity_knob")
    run.save_table(pd.DataFrame(tuned_rows), "severity_knob_tuning")
    return {"task": kc.task, "factors": factors, "n": n, "priors": P, "methods": out, "gain_of": f"{a} − {b}",
            "tuned_by_prior": {f"{m}@{f}": tuned_by[f, m] for f in factors for m in kc.methods}}
