"""The scratch baselines: pix2pix to its plateau (which sets the PSNR target) and E²GAN from scratch,
per new concept, one job per seed."""
from __future__ import annotations

import torch

from shared.seeding import derive_seed

from ..data import slug
from ..train import train_gan
from .setup import SCRATCH_ARMS, Setup, evaluate, full_bytes, job_seeds, read_metrics

N_SCRATCH_JOBS = 3  # scratch baselines run as one job per seed index (rules.smk); extra jobs skip


def scratch_seed(index: int, run) -> dict:
    """pix2pix (9 RBs) trained from scratch on each new concept, at seed `concepts.seeds[index]`, until its
    validation PSNR plateaus (`scratch.patience` evaluations without a `scratch.min_delta` dB gain); the
    target is that plateau (its best PSNR) − `finetune.target_margin_db`. E²GAN from scratch then trains
    on the same minibatches until it reaches the target or plateaus. The last job also takes any seeds
    beyond `N_SCRATCH_JOBS`."""
    mine = job_seeds(run.cfg, index, N_SCRATCH_JOBS)
    return {"runs": scratch_runs(run, mine) if mine else {}, "seeds": mine}


def scratch_runs(run, seeds) -> dict:
    setup, cfg = Setup(run), run.cfg
    sc = cfg.scratch
    lrs = read_metrics(run, "lr_grid_scratch")["chosen"]
    ckpt = run.out / "checkpoints" / "scratch_baselines"
    ckpt.mkdir(parents=True, exist_ok=True)
    out = {}
    for concept in cfg.concepts.new:
        train, test = setup.pairs(concept, "train"), setup.pairs(concept, "test")
        for seed in seeds:
            row, target = {}, None
            for arm in SCRATCH_ARMS:
                torch.manual_seed(derive_seed(seed, "scratch init", arm, concept))
                G = setup.pix2pix() if arm == "pix2pix_scratch" else setup.e2gan()
                hist = train_gan(G, setup.discriminator(), train, sc.max_steps,
                                 seed=derive_seed(seed, "scratch", concept), test=test, eval_every=sc.eval_every,
                                 patience=sc.patience, min_delta=sc.min_delta, stop_at=target,
                                 **setup.train_kwargs(lora=False, lr=lrs[arm]))
                torch.save(G.state_dict(), ckpt / f"{slug(concept)}_{arm}_s{seed}.pt")
                setup.log_fit(f"{arm}/{concept}/s{seed}", hist)
                row[arm] = {**evaluate(G, test, setup), **setup.paper_metrics(G, test, concept),
                            "curve": hist["curve"],
                            "seconds": hist["seconds"], "flops_per_step": hist["flops_per_step"],
                            "steps": hist["steps"], "trainable_params": hist["trainable_params"],
                            "stored_bytes": full_bytes(G), "lr": lrs[arm]}
                if arm == "pix2pix_scratch":
                    best = max(hist["curve"][1:], key=lambda c: c[1])
                    row["plateau_psnr"], row["plateau_step"] = best[1], best[0]
                    row["stopped_at"] = hist["steps"]
                    target = row["target_psnr"] = best[1] - cfg.finetune.target_margin_db
            out[f"{concept}|{seed}"] = row
    return out


def read_scratch(run) -> dict:
    """The scratch runs of every seed job, keyed "concept|seed"."""
    out = {}
    for i in range(N_SCRATCH_JOBS):
        out.update(read_metrics(run, f"scratch_s{i}")["runs"])
    return out


