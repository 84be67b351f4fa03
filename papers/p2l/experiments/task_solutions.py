"""main_<task>: tuning on the validation split, then every method on the held-out test problems."""
from __future__ import annotations

import numpy as np
import pandas as pd

from shared.samples import combine, is_sample, sample

from .. import metrics as M
from ..data import make_split
from ..full_metrics import FullMetrics
from .problems import (TASK_NAMES, _show, _solve_batches, grouped_by_prior, held_out_problem, load_classifier,
                       load_images, load_prior, method_hparams, n_priors, per_image_mean, record_scores)
from .tuning import edge_flags, tune, tuning_figure


def task_methods(cfg, task: str, captions: bool = True) -> list[str]:
    """The methods `main_<task>` runs: `methods`, less those `method_tasks` keeps to other tasks (the oracle
    runs where its claims read it) and, without captions (full), the oracles."""
    only = dict(cfg.get("method_tasks", {}) or {})
    return [m for m in cfg.methods if (captions or not m.startswith("oracle")) and task in only.get(m, [task])]


def main_task(run, task: str) -> dict:
    """Per prior: each method tuned on the validation images with the equal budget (`tuning.tune`), then
    solved on the held-out problems; per-image scores of all priors grouped by prior."""
    cfg = run.cfg
    P = n_priors(cfg)
    clf = load_classifier(cfg, run.out)
    op, test, y = held_out_problem(cfg, task, run.seed)
    val = load_images(cfg, "val", cfg.data.n_val)
    methods = task_methods(cfg, task, captions=test["captions"] is not None)
    gt = test["images"]
    k = int(cfg.data.noise_seeds)   # rows: image i under draw d at d·n_test + i
    n = len(gt) // k
    ref = make_split(cfg.seed, "ref", cfg.data.n_ref, cfg.image_size)["images"] if clf is not None else None
    ref_feat = M.features(clf, ref) if clf is not None else None
    idx = M.bootstrap_indices(n, cfg.bootstrap.n, run.seed, draws=k)
    gt_hf = M.high_frequency_energy(gt)   # per problem
    full_metrics = FullMetrics(cfg)   # full: LPIPS per image, FID per method (metrics.lpips / metrics.fid)
    tuning_rows, per_image, recon, fd_boots = [], [], {}, {}
    runs = {m: {"scores": [], "tuned": [], "edges": [], "fd": [], "fd_jk": [], "wall": [], "fid": []} for m in methods}
    for prior in range(P):
        ldm = load_prior(cfg, run.out, prior)
        for m in methods:
            tuned, rows = tune(cfg, m, task, op, ldm, val, run.seed + 1)
            tuning_rows += [{"prior": prior, **r} for r in rows]
            hp = {**method_hparams(cfg, m), **tuned, "record_every": cfg.solve.record_every}
            x, nfe, wall, traj, records, calls = _solve_batches(m, y, op, ldm, cfg, run.seed, test["captions"], **hp)
            hf = M.high_frequency_energy(x)
            # artifacts as an outcome: how far the output's high-frequency share is from its ground truth's
            scores = {"psnr": M.psnr(x, gt), "ssim": M.ssim(x, gt), "hf_energy": hf, "hf_error": np.abs(hf - gt_hf),
                      "residual": M.per_image_residual(op, x, y), **record_scores(records),
                      **full_metrics.scores(x, gt)}
            if clf is not None:
                scores["attr_acc"] = M.attribute_accuracy(clf, x, test["labels"])
            r = runs[m]
            r["scores"].append(scores)
            r["tuned"].append(tuned)
            r["edges"].append(edge_flags(tuned, rows))
            r["wall"].append(wall)
            r["evaluations"] = len(rows) * len(val["images"])
            if clf is not None:
                feat = M.features(clf, x)
                r["fd"].append(M.frechet_distance(feat, ref_feat))
                # per image, FD's jackknife pseudo-values: what the ledger decides FD comparisons on (paired
                # by image, its bootstrap over images); their mean is the jackknife estimate of FD
                r["fd_jk"].append(M.fd_pseudo_values(feat, ref_feat, n, k))
                if prior == 0:
                    fd_boots[m] = np.array([M.frechet_distance(feat[i], ref_feat) for i in idx])
            if (fid := full_metrics.fid(x, gt)) is not None:
                r["fid"].append(fid)
            if prior == 0:
                recon[m] = x
                r.update(nfe=nfe, calls=calls, traj=traj)
            for i in range(len(gt)):
                per_image.append({"task": task, "prior": prior, "method": m, "image": i % cfg.data.n_test,
                                  "noise_seed": i // cfg.data.n_test, **{key: float(v[i]) for key, v in scores.items()}})
    run.save_table(pd.DataFrame(tuning_rows), f"tuning_{task}")
    run.save_figure(tuning_figure(task, [r for r in tuning_rows if r["prior"] == 0]), f"tuning_{task}")

    out = {}
    for m in methods:
        r = runs[m]
        out[m] = {key: grouped_by_prior([per_image_mean(s[key], k) for s in r["scores"]], P) for key in r["scores"][0]}
        # prior 0's first noise draw alone (what the ablation and the longer-sampling check solve again)
        out[m]["first_draw"] = {key: sample(np.asarray(r["scores"][0][key])[:n], "image") for key in ("psnr", "ssim")}
        if clf is not None:
            out[m]["fd"] = sample(r["fd"], "seed")   # one FD per prior
            out[m]["fd_jackknife"] = grouped_by_prior(r["fd_jk"], P)
            out[m]["fd_bootstrap_ci"] = M.percentile_interval(fd_boots[m])
        if r["fid"]:
            out[m]["fid"] = sample(r["fid"], "seed")   # one set per prior: the per-image LPIPS carries the interval
        # the ablation and the longer-sampling check reuse prior 0's tuned values (`tuned`)
        out[m].update({"rho": r["tuned"][0]["rho"], "tuned": r["tuned"][0], "tuned_at_edge": r["edges"][0],
                       "tuned_by_prior": r["tuned"], "tuned_at_edge_by_prior": r["edges"],
                       "tuning_evaluations": r["evaluations"], "nfe": r["nfe"], "decoder_calls": r["calls"]["decoder"],
                       "encoder_calls": r["calls"]["encoder"], "wall_s": sample(r["wall"], "seed"),
                       "trajectory": r["traj"]})
    for m in methods:
        out[m]["runtime_ratio_to_ldps"] = combine([out[m]["wall_s"], out["ldps"]["wall_s"]], lambda a, b: a / b)
        out[m]["nfe_ratio_to_ldps"] = out[m]["nfe"] / out["ldps"]["nfe"]
        for other in ("psld", "ldps"):
            if other in out:
                out[m][f"calls_over_{other}"] = {key: out[m][c] / max(out[other][c], 1) if out[other][c] else None
                                                  for key, c in (("nfe", "nfe"), ("decoder", "decoder_calls"),
                                                                 ("encoder", "encoder_calls"))}
    diffs = {}   # paired per-image gaps (and the FD gap with its paired bootstrap interval)
    for a, b in (("p2l", "psld"), ("psld", "ldps"), ("p2l", "ldps"), ("oracle_projection", "p2l")):
        if a in out and b in out:
            diffs[f"{a}_minus_{b}"] = {key: combine([v, out[b][key]], lambda u, w: u - w)
                                       for key, v in out[a].items()
                                       if is_sample(v) and v["unit"] == "image" and key in out[b]}
            diffs[f"{a}_minus_{b}"]["first_draw"] = {key: combine([v, out[b]["first_draw"][key]], lambda u, w: u - w)
                                                     for key, v in out[a]["first_draw"].items()}
            if a in fd_boots:
                diffs[f"{a}_minus_{b}"]["fd"] = combine([out[a]["fd"], out[b]["fd"]], lambda u, v: u - v)
                diffs[f"{a}_minus_{b}"]["fd_bootstrap_ci"] = M.percentile_interval(fd_boots[a] - fd_boots[b])
    run.save_table(pd.DataFrame(per_image), f"per_image_{task}")
    fig = grid_figure(task, op, y, gt, recon, n=cfg.figure.grid_images)
    run.save_figure(fig, f"grid_{task}")
    return {"task": task, "methods": out, "paired": diffs, "gt_hf_energy": float(gt_hf.mean()), "sigma_y": cfg.solve.sigma_y,
            "steps": cfg.solve.steps, "n_test": n, "noise_seeds": k, "priors": P, "n_val": len(val["images"]),
            "tuning_budget": int(cfg.tuning.get("budget") or 0)}


def grid_figure(task, op, y, gt, recon, n=4):
    import matplotlib.pyplot as plt

    cols = ["measurement", *recon, "ground truth"]
    fig, axes = plt.subplots(n, len(cols), figsize=(1.1 * len(cols), 1.15 * n), squeeze=False)
    meas = op.pseudo_adjoint(y)
    for i in range(n):
        imgs = [meas[i], *(recon[m][i] for m in recon), gt[i]]
        for j, img in enumerate(imgs):
            _show(axes[i, j], img)
            if i == 0:
                axes[i, j].set_title(cols[j].replace("_", "-"), fontsize=7)
    fig.suptitle(TASK_NAMES.get(task, task), fontsize=9)
    fig.tight_layout()
    return fig
