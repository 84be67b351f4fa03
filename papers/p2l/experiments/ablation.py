"""ablation: prompt tuning / projection on and off, proximal vs gluing, K and τ."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from shared.io import read_json
from shared.samples import sample

from .. import metrics as M
from ..data import make_split
from .problems import _solve_batches, cell, held_out_problem, load_classifier, load_images, load_prior, method_hparams, record_scores
from .tuning import tune


def ablation(run) -> dict:
    cfg = run.cfg
    task = cfg.ablation.task
    tuned = read_json(Path(run.out) / "metrics" / f"main_{task}.json")["methods"]
    ldm, clf = load_prior(cfg, run.out), load_classifier(cfg, run.out)
    op, test, y = held_out_problem(cfg, task, run.seed)
    n = min(int(cfg.ablation.n), cfg.data.n_test)   # the first n images, first noise draw (cost)
    test = {k: (v if v is None else v[:n]) for k, v in test.items()}   # full: no captions or labels
    y = y[:n]
    val = load_images(cfg, "val", cfg.data.n_val)
    gt = test["images"]
    ref_feat = M.features(clf, make_split(cfg.seed, "ref", cfg.data.n_ref, cfg.image_size)["images"]) if clf else None
    variants = {
        "ldps": ("ldps", {}),
        "prompt_only": ("p2l_prompt_only", {}),
        "projection_only": ("p2l_projection_only", {}),
        "p2l": ("p2l", {}),
        "p2l_gluing": ("p2l_glue", {}),
        **{f"p2l_K{k}": ("p2l", {"prompt_steps": k}) for k in cfg.ablation.K},
        **{f"p2l_tau{t}": ("p2l", {"tau": t}) for t in cfg.ablation.tau},
    }
    # every variant at its own ρ, tuned on the validation split like the main table's methods; LDPS and
    # P2L keep the main table's tuned values; the variants take P2L's tuned values of the components they
    # keep (prompt: prompt_lr, K; projection: τ, λ), then their own change
    p2l_tuned = tuned["p2l"]["tuned"]
    prompt = {k: p2l_tuned[k] for k in ("prompt_lr", "prompt_steps") if k in p2l_tuned}
    proj = {k: p2l_tuned[k] for k in ("tau", "lam") if k in p2l_tuned}
    kept = {"p2l_prompt_only": prompt, "p2l_projection_only": proj, "p2l_glue": prompt, "p2l": {**prompt, **proj}}
    rows, out, tuning_rows = [], {}, []
    for name, (method, extra) in variants.items():
        if name in ("ldps", "p2l"):
            own = tuned[name]["tuned"]
        else:
            base = {**kept.get(method, {}), **extra}
            own, trows = tune(cfg, method, task, op, ldm, val, run.seed + 1, base=base, extra_axes=False)
            own = {**base, **own}
            tuning_rows += [{**r, "variant": name} for r in trows]
        hp = {**method_hparams(cfg, method), **own, "record_every": cfg.solve.record_every, **extra}
        x, nfe, wall, traj, records, _ = _solve_batches(method, y, op, ldm, cfg, run.seed, test["captions"], **hp)
        scores = {"psnr": M.psnr(x, gt), "ssim": M.ssim(x, gt), **record_scores(records),
                  "hf_energy": M.high_frequency_energy(x)}
        r = {k: sample(v, "image") for k, v in scores.items()}
        r["nfe"] = nfe
        r["rho"] = own["rho"]
        if clf is not None:
            r["fd"] = sample([M.frechet_distance(M.features(clf, x), ref_feat)], "seed")
        out[name] = r
        rows.append({"variant": name, "n": len(gt), **{k: cell(v) for k, v in r.items()}, "wall_s": wall})
    run.save_table(pd.DataFrame(rows), "ablation")
    run.save_table(pd.DataFrame(tuning_rows), "ablation_tuning")
    # the better single component by its mean SSIM; P2L is then compared with it image by image
    best = max(("prompt_only", "projection_only"), key=lambda k: out[k]["ssim"]["mean"])
    return {"task": task, "variants": out, "best_single": {"variant": best, "ssim": out[best]["ssim"]}}
