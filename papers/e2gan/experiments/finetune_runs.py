"""Every fine-tuning arm on every new concept, one job per seed."""
from __future__ import annotations

import json

import numpy as np

from ..data import slug
from ..lora import adapter_state
from ..train import predict
from .arms import all_layer_ranks, arm_budget, arm_ranks, finetune, random_ranks, relative_change
from .bases import base_replicate, load_base
from .setup import FT_ARMS, Setup, evaluate, job_seeds, read_metrics

N_FT_JOBS = 3   # the fine-tuning arms run as one job per seed index (rules.smk), beside the scratch jobs
GRID_DIR = ("concept_table", "grid")   # the first seed's fine-tuned outputs on the image grid's test images
ADAPTER_DIR = ("concept_table", "adapters")   # the first seed's searched adapters (the explorer loads them)


def finetune_seed(index: int, run) -> dict:
    """Every fine-tuning arm (`FT_ARMS`) on every new concept at seed `concepts.seeds[index]` (the last
    job also takes any seeds beyond `N_FT_JOBS`), each under its own rule (`arm_budget`: LoRA arms
    `finetune.steps` steps, the full fine-tune to its plateau) at the arm's tuned lr. An arm whose ranks
    and lr equal an earlier arm's (searched = 1× when the search keeps 1×) would train the same thing:
    it takes that run's row and curve.
    The fine-tunes do not need the scratch targets (steps to target are read off their PSNR curves in
    `concept_table`), so these jobs run beside the scratch jobs. Returns per run its row, its curve,
    the random arm's rank draw and the full fine-tune's layer changes; the first seed also saves its
    searched adapters and its outputs on the image grid's test images."""
    setup, cfg = Setup(run), run.cfg
    seeds = list(cfg.concepts.seeds)
    mine = job_seeds(cfg, index, N_FT_JOBS)
    bases = {seed: load_base(run, setup, "clustered", base_replicate(cfg, seed)) for seed in mine}
    searched = read_metrics(run, "rank_search")["ranks"]
    lrs = read_metrics(run, "lr_grid")["chosen"]
    adapters = run.out.joinpath("checkpoints", *ADAPTER_DIR)
    grid = run.out.joinpath("checkpoints", *GRID_DIR)
    runs, draws, changes = {}, [], []
    for concept in cfg.concepts.new:
        train, test = setup.pairs(concept, "train"), setup.pairs(concept, "test")
        for seed in mine:
            base = bases[seed]
            done = {}
            for arm in FT_ARMS:
                ranks = arm_ranks(setup, arm, seed, concept, searched)
                if arm == "lora_random":
                    draws.append({"concept": concept, "seed": seed, "arm": arm, **ranks,
                                  "matched": random_ranks(setup, searched, seed, concept)[1]})
                if arm == "lora_all":
                    draws.append({"concept": concept, "seed": seed, "arm": arm, **ranks,
                                  "matched": all_layer_ranks(setup, searched, seed, concept)[1]})
                key = (arm == "full_ft", tuple(sorted((ranks or {}).items())), lrs[arm])
                if key in done:   # the same ranks at the same lr: that run, not a retraining
                    G, first = done[key]
                    runs[f"{concept}|{seed}|{arm}"] = {
                        "row": {**runs[f"{concept}|{seed}|{first}"]["row"], "arm": arm, "same_run_as": first},
                        "history": runs[f"{concept}|{seed}|{first}"]["history"]}
                else:
                    budget = arm_budget(cfg, arm)
                    G, hist = finetune(setup, base, arm, ranks, train, test, budget.pop("steps"), seed,
                                       lr=lrs[arm], concept=concept, **budget)
                    done[key] = (G, arm)
                    runs[f"{concept}|{seed}|{arm}"] = {
                        "row": {"concept": concept, "seed": seed, "arm": arm, **evaluate(G, test, setup),
                                **setup.paper_metrics(G, test, concept),
                                "trainable_params": hist["trainable_params"], "stored_bytes": hist["stored_bytes"],
                                "flops_per_step": hist["flops_per_step"], "lr": lrs[arm],
                                "steps_run": hist["steps"], "batch_digest": hist["batch_digest"]},
                        "history": {k: hist[k] for k in ("curve", "seconds", "steps", "flops_per_step")}}
                if arm == "full_ft":
                    changes.append({"concept": concept, "seed": seed, **relative_change(base["G"], G)})
                if seed == seeds[0]:
                    grid.mkdir(parents=True, exist_ok=True)
                    np.save(grid / f"{slug(concept)}_{arm}.npy", predict(G, test.subset(range(cfg.grid.n_images))))
                    if arm == "lora_searched":
                        from safetensors.torch import save_file

                        adapters.mkdir(parents=True, exist_ok=True)
                        save_file(adapter_state(G), str(adapters / f"{slug(concept)}.safetensors"))
                        (adapters / "ranks.json").write_text(json.dumps(searched))
    return {"runs": runs, "draws": draws, "layer_changes": changes, "seeds": mine}


