"""ablation: prompt tuning / projection on and off, proximal vs gluing, K and τ."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from shared.io import read_json
from shared.samples import sample

from .. import metrics as M
from ..data import make_split
from .problems import (_solve_batches, cell, grouped_by_prior, held_out_problem, load_classifier, load_images, load_prior,
                       main_solves, method_hparams, n_priors, record_scores)
from .tuning import tune

# the per-image scores of a variant, in the table's column order
SCORES = ("psnr", "ssim", "off_range", "final_off_range", "prompt_cos", "null_cos", "caption_top1", "hf_energy")


def ablation(run) -> dict:
    """Each variant at its own ρ, tuned on the validation split like the main table's methods. The variants
    the claims read (`ablation.every_prior`) run on every prior, grouped by prior; the others (gluing, K, τ)
    on prior 0, as table rows."""
    cfg = run.cfg
    task = cfg.ablation.task
    main = read_json(Path(run.out) / "metrics" / f"main_{task}.json")["methods"]
    clf = load_classifier(cfg, run.out)
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
    every = set(cfg.ablation.get("every_prior", list(variants)))
    P = n_priors(cfg)
    per = {name: {"scores": [], "fd": [], "rho": [], "wall": [], "nfe": None} for name in variants}
    tuning_rows = []
    for prior in range(P):
        ldm = load_prior(cfg, run.out, prior)
        # LDPS and P2L keep the main table's values tuned on this prior; the variants take P2L's values of
        # the components they keep (prompt: prompt_lr, K; projection: τ, λ), then their own change
        tuned = {m: main[m]["tuned_by_prior"][prior] for m in ("ldps", "p2l")}
        prompt = {k: tuned["p2l"][k] for k in ("prompt_lr", "prompt_steps") if k in tuned["p2l"]}
        proj = {k: tuned["p2l"][k] for k in ("tau", "lam") if k in tuned["p2l"]}
        kept = {"p2l_prompt_only": prompt, "p2l_projection_only": proj, "p2l_glue": prompt, "p2l": {**prompt, **proj}}
        for name, (method, extra) in variants.items():
            if prior > 0 and name not in every:
                continue
            if name in tuned:
                own = tuned[name]
            else:
                base = {**kept.get(method, {}), **extra}
                own, trows = tune(cfg, method, task, op, ldm, val, run.seed + 1, base=base, extra_axes=False)
                own = {**base, **own}
                tuning_rows += [{**r, "variant": name, "prior": prior} for r in trows]
            r = per[name]
            r["rho"].append(own["rho"])
            # LDPS and P2L at the main table's values: its own test solves, read (the same images, draw and seed)
            done = main_solves(cfg, main, name, prior, n, SCORES) if name in tuned else None
            if done is not None:
                r["scores"].append(done["scores"])
                r["wall"].append(done["wall"])
                r["nfe"] = done["nfe"]
                if clf is not None:
                    r["fd"].append(done["fd"])
                continue
            hp = {**method_hparams(cfg, method), **own, "record_every": cfg.solve.record_every, **extra}
            x, nfe, wall, traj, records, _ = _solve_batches(method, y, op, ldm, cfg, run.seed, test["captions"], **hp)
            r["scores"].append({"psnr": M.psnr(x, gt), "ssim": M.ssim(x, gt), **record_scores(records),
                                "hf_energy": M.high_frequency_energy(x)})
            r["wall"].append(wall)
            r["nfe"] = nfe
            if clf is not None:
                r["fd"].append(M.frechet_distance(M.features(clf, x), ref_feat))
    rows, out = [], {}
    for name, r in per.items():
        k = len(r["scores"])   # the priors this variant ran on
        res = {key: grouped_by_prior([s[key] for s in r["scores"]], k) for key in r["scores"][0]}
        res["nfe"] = r["nfe"]
        res["rho"] = r["rho"][0]
        res["rho_by_prior"] = r["rho"]
        if clf is not None:
            res["fd"] = sample(r["fd"], "seed")   # one FD per prior
        out[name] = res
        cells = {key: cell(v) for key, v in res.items() if key != "rho_by_prior"}
        rows.append({"variant": name, "priors": k, "n": len(gt),
                     **{key: f"{c:.3f}" if isinstance(c, float) else c for key, c in cells.items()},
                     "rho": " / ".join(f"{v:g}" for v in r["rho"]), "wall_s": float(np.mean(r["wall"]))})
    run.save_table(pd.DataFrame(rows), "ablation")
    run.save_table(pd.DataFrame(tuning_rows), "ablation_tuning")
    # the better single component by its mean SSIM; P2L is then compared with it image by image
    best = max(("prompt_only", "projection_only"), key=lambda k: out[k]["ssim"]["mean"])
    return {"task": task, "priors": P, "every_prior": sorted(every), "variants": out,
            "best_single": {"variant": best, "ssim": out[best]["ssim"]}}
