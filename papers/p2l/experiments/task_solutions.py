"""main_<task>: tuning on the validation split, then every method on the held-out test problems."""
from __future__ import annotations

import numpy as np
import pandas as pd

from shared.samples import combine, is_sample, sample

from .. import metrics as M
from ..data import make_split
from ..full_metrics import FullMetrics
from .problems import (TASK_NAMES, _show, _solve_batches, held_out_problem, load_classifier, load_images, load_prior,
                       method_hparams, per_image_mean, record_scores)
from .tuning import edge_flags, tune, tuning_figure


def main_task(run, task: str) -> dict:
    cfg = run.cfg
    ldm, clf = load_prior(cfg, run.out), load_classifier(cfg, run.out)
    op, test, y = held_out_problem(cfg, task, run.seed)
    val = load_images(cfg, "val", cfg.data.n_val)
    methods = [m for m in cfg.methods if not m.startswith("oracle") or test["captions"] is not None]
    tuned, tuning_rows, edges = {}, [], {}
    for m in methods:
        tuned[m], rows = tune(cfg, m, task, op, ldm, val, run.seed + 1)
        edges[m] = edge_flags(tuned[m], rows)
        tuning_rows += rows
    run.save_table(pd.DataFrame(tuning_rows), f"tuning_{task}")
    run.save_figure(tuning_figure(task, tuning_rows), f"tuning_{task}")

    gt = test["images"]
    ref = make_split(cfg.seed, "ref", cfg.data.n_ref, cfg.image_size)["images"] if clf is not None else None
    ref_feat = M.features(clf, ref) if clf is not None else None
    k = int(cfg.data.noise_seeds)   # rows: image i under draw d at d·n_test + i
    idx = M.bootstrap_indices(len(gt) // k, cfg.bootstrap.n, run.seed, draws=k)
    per_image, out, recon, fd_boots = [], {}, {}, {}
    gt_hf = M.high_frequency_energy(gt)   # per problem
    full_metrics = FullMetrics(cfg)   # full: LPIPS per image, FID per method (metrics.lpips / metrics.fid)
    for m in methods:
        hp = {**method_hparams(cfg, m), **tuned[m], "record_every": cfg.solve.record_every}
        x, nfe, wall, traj, records, calls = _solve_batches(m, y, op, ldm, cfg, run.seed, test["captions"], **hp)
        recon[m] = x
        hf = M.high_frequency_energy(x)
        # artifacts as an outcome: how far the output's high-frequency share is from its ground truth's
        scores = {"psnr": M.psnr(x, gt), "ssim": M.ssim(x, gt), "hf_energy": hf, "hf_error": np.abs(hf - gt_hf),
                  "residual": M.per_image_residual(op, x, y), **record_scores(records),
                  **full_metrics.scores(x, gt)}
        if clf is not None:
            scores["attr_acc"] = M.attribute_accuracy(clf, x, test["labels"])
        out[m] = {key: sample(per_image_mean(v, k), "image") for key, v in scores.items()}
        # the first noise draw alone (what the ablation and the 250-step check solve)
        out[m]["first_draw"] = {key: sample(np.asarray(scores[key])[:len(gt) // k], "image") for key in ("psnr", "ssim")}
        if clf is not None:
            feat = M.features(clf, x)
            fd_boots[m] = np.array([M.frechet_distance(feat[i], ref_feat) for i in idx])
            out[m]["fd"] = sample([M.frechet_distance(feat, ref_feat)], "seed")
            # per image, FD's jackknife pseudo-values: what the ledger decides FD comparisons on (paired
            # by image, its bootstrap over images); their mean is the jackknife estimate of FD
            out[m]["fd_jackknife"] = sample(M.fd_pseudo_values(feat, ref_feat, len(gt) // k, k), "image")
            out[m]["fd_bootstrap_ci"] = M.percentile_interval(fd_boots[m])
        if (fid := full_metrics.fid(x, gt)) is not None:
            out[m]["fid"] = sample([fid], "seed")   # one set: the per-image LPIPS carries the interval
        out[m].update({"rho": tuned[m]["rho"], "tuned": tuned[m], "tuned_at_edge": edges[m], "nfe": nfe, "decoder_calls": calls["decoder"],
                       "encoder_calls": calls["encoder"], "wall_s": sample([wall], "seed"), "trajectory": traj})
        for i in range(len(gt)):
            per_image.append({"task": task, "method": m, "image": i % cfg.data.n_test,
                              "noise_seed": i // cfg.data.n_test, **{k: float(v[i]) for k, v in scores.items()}})
    for m in methods:
        out[m]["runtime_ratio_to_ldps"] = combine([out[m]["wall_s"], out["ldps"]["wall_s"]], lambda a, b: a / b)
        out[m]["nfe_ratio_to_ldps"] = out[m]["nfe"] / out["ldps"]["nfe"]
        for other in ("psld", "ldps"):
            if other in out:
                out[m][f"calls_over_{other}"] = {k: out[m][c] / max(out[other][c], 1) if out[other][c] else None
                                                  for k, c in (("nfe", "nfe"), ("decoder", "decoder_calls"),
                                                               ("encoder", "encoder_calls"))}
    diffs = {}   # paired per-image gaps (and the FD gap with its paired bootstrap interval)
    for a, b in (("p2l", "psld"), ("psld", "ldps"), ("p2l", "ldps"), ("oracle_projection", "p2l")):
        if a in out and b in out:
            diffs[f"{a}_minus_{b}"] = {k: combine([v, out[b][k]], lambda u, w: u - w)
                                       for k, v in out[a].items()
                                       if is_sample(v) and v["unit"] == "image" and k in out[b]}
            diffs[f"{a}_minus_{b}"]["first_draw"] = {k: combine([v, out[b]["first_draw"][k]], lambda u, w: u - w)
                                                     for k, v in out[a]["first_draw"].items()}
            if a in fd_boots:
                diffs[f"{a}_minus_{b}"]["fd"] = combine([out[a]["fd"], out[b]["fd"]], lambda u, v: u - v)
                diffs[f"{a}_minus_{b}"]["fd_bootstrap_ci"] = M.percentile_interval(fd_boots[a] - fd_boots[b])
    run.save_table(pd.DataFrame(per_image), f"per_image_{task}")
    fig = grid_figure(task, op, y, gt, recon, n=cfg.figure.grid_images)
    run.save_figure(fig, f"grid_{task}")
    return {"task": task, "methods": out, "paired": diffs, "gt_hf_energy": float(gt_hf.mean()), "sigma_y": cfg.solve.sigma_y,
            "steps": cfg.solve.steps, "n_test": len(gt) // int(cfg.data.noise_seeds),
            "noise_seeds": int(cfg.data.noise_seeds)}



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
