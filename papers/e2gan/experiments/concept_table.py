"""The per-concept table: every arm's quality, size, FLOPs and steps to the target; FLOP ratios, layer
changes, the image grid."""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from shared.samples import count, sample

from ..data import slug, to_images
from ..lora import GROUP_PREFIXES
from ..models import CRUCIAL_GROUPS
from ..train import Pairs, predict, to_target
from .bases import base_replicate, load_base
from .finetune_runs import GRID_DIR, N_FT_JOBS
from .scratch import read_scratch
from .setup import (COUNTED, FT_ARMS, PAPER_METRICS, SAMPLED, SCRATCH_ARMS, Setup, ci_text, difference, evaluate,
                    full_bytes, geomean, read_metrics, seed_samples)

def concept_table(run) -> dict:
    """Per new concept: every arm's quality, parameters, bytes stored, FLOPs and steps to the target;
    per-concept FLOP ratios with their geometric mean; one-off costs and break-even; layer changes.
    Assembles the scratch jobs (targets, scratch rows) and the fine-tuning jobs (`finetune_s*`)."""
    setup, cfg = Setup(run), run.cfg
    seeds = list(cfg.concepts.seeds)
    replicate = {seed: base_replicate(cfg, seed) for seed in seeds}
    bases = {r: load_base(run, setup, "clustered", r) for r in sorted(set(replicate.values()))}
    # the base each seed adapts is the outer unit (grouped samples) when there is one per seed
    grouping = ({"groups": [f"base{replicate[s]}" for s in seeds], "group_unit": "base"}
                if cfg.base.one_per_seed else {})
    search = read_metrics(run, "rank_search")
    searched = search["ranks"]
    lrs = read_metrics(run, "lr_grid")
    scratch = read_scratch(run)
    ft, draws, changes = {}, [], []
    for i in range(N_FT_JOBS):
        part = read_metrics(run, f"finetune_s{i}")
        ft.update(part["runs"])
        draws += part["draws"]
        changes += part["layer_changes"]
    order = {c: i for i, c in enumerate(cfg.concepts.new)}   # the jobs are per seed: back to concept-major

    def concept_major(d):
        return order[d["concept"]], list(cfg.concepts.seeds).index(d["seed"])

    draws.sort(key=concept_major)
    changes.sort(key=concept_major)
    rows, equal_steps = [], []
    for concept in cfg.concepts.new:
        test = setup.pairs(concept, "test")
        identity = {**evaluate(IdentityGenerator(), test, setup), **setup.paper_metrics(IdentityGenerator(), test, concept)}
        zero_shot = {r: zero_shot_quality(setup, b, test, concept) for r, b in bases.items()}
        for seed in cfg.concepts.seeds:
            sc = scratch[f"{concept}|{seed}"]
            target = sc["target_psnr"]
            floors = {"floor_identity": identity, "floor_zero_shot": zero_shot[replicate[seed]]}
            for arm, q in floors.items():  # untrained arms: the same value at every seed of one base
                rows.append({"concept": concept, "seed": seed, "arm": arm, **q, "trainable_params": 0,
                             "stored_bytes": 0, "flops_per_step": 0, "steps_run": 0,
                             "reached_to_target": q["psnr"] >= target, "steps_to_target": 0.0,
                             "seconds_to_target": 0.0, "flops_to_target": 0.0})
            for arm in SCRATCH_ARMS:
                r = sc[arm]
                hist = {"curve": r["curve"], "seconds": r["seconds"], "steps": r["steps"],
                        "flops_per_step": r["flops_per_step"]}
                rows.append({"concept": concept, "seed": seed, "arm": arm, "psnr": r["psnr"], "ssim": r["ssim"],
                             "fd": r["fd"], **{k: r[k] for k in PAPER_METRICS if k in r},
                             "trainable_params": r["trainable_params"],
                             "stored_bytes": full_bytes(setup.pix2pix() if arm == "pix2pix_scratch" else setup.e2gan()),
                             "flops_per_step": r["flops_per_step"],
                             "lr": r["lr"], "steps_run": r["steps"],
                             **{f"{k}_to_target": v for k, v in to_target(hist, target).items()}})
            for arm in FT_ARMS:
                r = ft[f"{concept}|{seed}|{arm}"]
                rows.append({**r["row"], **{f"{k}_to_target": v for k, v in to_target(r["history"], target).items()}})
            equal_steps.append({"concept": concept, "seed": seed,
                                "psnr": psnr_at(sc["e2gan_scratch"]["curve"], cfg.finetune.steps)})
    df = pd.DataFrame(rows)
    summary = df.drop(columns=["concept", "seed", "batch_digest"]).groupby("arm", sort=False).mean(
        numeric_only=True).reset_index()
    # wall time (seconds_to_target) stays in the tables, not in checked metrics
    arms = seed_samples(df, "arm", seeds, SAMPLED + tuple(k for k in PAPER_METRICS if k in df.columns),
                        grouping.get("groups"))
    for r in summary.to_dict("records"):
        arms[r["arm"]].update({c: float(r[c]) for c in COUNTED})
    # E2GAN from scratch at the fine-tunes' step budget: its PSNR curve read at `finetune.steps`
    scratch_equal = seed_samples(pd.DataFrame(equal_steps).assign(arm="floor_scratch_equal_steps"), "arm", seeds,
                                 ("psnr",), grouping.get("groups"))["floor_scratch_equal_steps"]["psnr"]
    summary = pd.concat([summary, pd.DataFrame([{"arm": "floor_scratch_equal_steps", "psnr": scratch_equal["mean"],
                                                 "steps_run": cfg.finetune.steps}])], ignore_index=True)
    summary["psnr_ci90_over_seeds"] = [ci_text((scratch_equal if a == "floor_scratch_equal_steps" else arms[a]["psnr"])
                                               ["values"]) for a in summary["arm"]]
    summary["n_seeds"] = len(seeds)
    run.save_table(df, "e2gan_concept_runs")
    run.save_table(summary, "e2gan_concept_table")
    run.save_table(pd.DataFrame(draws), "e2gan_random_ranks")
    image_grid(run, setup)

    ratios = flops_ratios(run, df, seeds, grouping)
    times = time_ratios(df, seeds, grouping)
    layers = layer_change(run, pd.DataFrame(changes), seeds, grouping)
    s, full = arms["lora_searched"], arms["full_ft"]
    # one-off costs, paid once for all concepts: the base, the rank search and the lr grid
    base_flops = int(bases[0]["steps"]) * int(bases[0]["flops_per_step"])
    one_off = base_flops + int(search["train_flops"]) + int(lrs["train_flops"])
    per = df.groupby(["arm", "seed"])["flops_to_target"].mean()
    saving = {ref: [per[(ref, sd)] - per[("lora_searched", sd)] for sd in seeds] for ref in SCRATCH_ARMS}
    break_even = {ref: sample([one_off / v if v > 0 else np.inf for v in saving[ref]], "seed", **grouping)
                  for ref in SCRATCH_ARMS}
    return {
        "arms": arms,
        "searched_ranks": searched,
        "chosen_lr": lrs["chosen"],
        "full_minus_searched_psnr_db": difference(full["psnr"], s["psnr"]),
        "searched_minus_1x_psnr_db": difference(s["psnr"], arms["lora_1x"]["psnr"]),
        "searched_minus_random_psnr_db": difference(s["psnr"], arms["lora_random"]["psnr"]),
        "searched_minus_4x_psnr_db": difference(s["psnr"], arms["lora_4x"]["psnr"]),
        # crucial layers by function: LoRA on every group (crucial + ResNet blocks) against LoRA on the
        # crucial groups only, both drawn at the searched arm's parameter count (±tolerance), paired
        "all_minus_crucial_psnr_db": difference(arms["lora_all"]["psnr"], arms["lora_random"]["psnr"]),
        "all_minus_searched_psnr_db": difference(arms["lora_all"]["psnr"], s["psnr"]),
        "full_ft_steps_to_plateau": float(df[df.arm == "full_ft"]["steps_run"].mean()),
        "searched_minus_zero_shot_psnr_db": difference(s["psnr"], arms["floor_zero_shot"]["psnr"]),
        "searched_minus_identity_psnr_db": difference(s["psnr"], arms["floor_identity"]["psnr"]),
        "scratch_equal_steps_psnr": scratch_equal,
        "searched_minus_scratch_equal_steps_psnr_db": difference(s["psnr"], scratch_equal),
        "searched_minus_pix2pix_psnr_db": difference(s["psnr"], arms["pix2pix_scratch"]["psnr"]),
        "searched_minus_pix2pix_fd": difference(s["fd"], arms["pix2pix_scratch"]["fd"]),
        "flops_per_step_by_arm": {a: arms[a]["flops_per_step"] for a in (*SCRATCH_ARMS, *FT_ARMS)},
        "searched_ranks_per_layer": search["per_layer"],
        **ratios,
        **times,
        "layer_change": layers,
        # both in fp16 (equal precision; the paper compares parameter counts)
        "bytes_ratio_full_to_searched": full["stored_bytes"] / s["stored_bytes"],
        "from_config": ["bytes_ratio_full_to_searched", "flops_per_step_by_arm"],
        "random_draws": draw_summary(draws, "lora_random", arms, s),
        "all_layer_draws": draw_summary(draws, "lora_all", arms, s),
        "one_off_flops": {"base": base_flops, "rank_search": int(search["train_flops"]),
                          "lr_grid": int(lrs["train_flops"]), "total": one_off},
        "break_even_concepts": break_even,
        "searched_reached_target": s["reached_to_target"],
        # every (concept, seed) run of searched LoRA: reached the target or not, an exact count
        "searched_runs_reaching_target": count(int(df[df.arm == "lora_searched"]["reached_to_target"].sum()),
                                               int((df.arm == "lora_searched").sum())),
        "e2gan_scratch_reached_target": arms["e2gan_scratch"]["reached_to_target"],
    }


class IdentityGenerator(torch.nn.Module):
    """The input as the output: the floor every trained arm must beat."""

    def forward(self, x, text=None, mask=None):
        return x


def psnr_at(curve, step: int) -> float:
    """A PSNR curve [(step, psnr), ...] read at `step`, linearly between evaluations (the last value past
    its end: a run that stopped early had reached its target)."""
    steps, values = zip(*curve)
    return float(np.interp(step, steps, values))


def zero_shot_quality(setup: Setup, base: dict, test: Pairs, concept: str) -> dict:
    """The un-adapted base on a new concept: the floor every fine-tune must beat (with FID/KID/CLIP
    score at full, as the trained arms; a floor without them read NaN there, found by the rehearsal)."""
    G = setup.e2gan()
    G.load_state_dict(base["G"])
    G.eval()
    return {**evaluate(G, test, setup), **setup.paper_metrics(G, test, concept)}


def flops_ratios(run, df: pd.DataFrame, seeds, grouping: dict) -> dict:
    """Per (concept, seed): a scratch arm's FLOPs to the target over searched LoRA's. Per seed the
    geometric mean over concepts (one slow concept cannot dominate it); per concept a sample over seeds."""
    f = df.set_index(["arm", "concept", "seed"])["flops_to_target"]
    reached = df.set_index(["arm", "concept", "seed"])["reached_to_target"]
    concepts = list(dict.fromkeys(df["concept"]))
    out, rows = {}, []
    for ref, name in (("pix2pix_scratch", "pix2pix"), ("e2gan_scratch", "scratch")):
        r = {(c, sd): f[(ref, c, sd)] / f[("lora_searched", c, sd)] for c in concepts for sd in seeds}
        out[f"flops_ratio_{name}_to_searched"] = sample([geomean([r[(c, sd)] for c in concepts]) for sd in seeds],
                                                        "seed", **grouping)
        out[f"flops_ratio_{name}_to_searched_by_concept"] = {c: sample([r[(c, sd)] for sd in seeds], "seed", **grouping)
                                                             for c in concepts}
    for c in concepts:
        rows.append({"concept": c,
                     **{f"vs_{n}": ci_text(out[f"flops_ratio_{n}_to_searched_by_concept"][c]["values"])
                        for n in ("pix2pix", "scratch")},
                     "searched_reached": float(np.mean([reached[("lora_searched", c, sd)] for sd in seeds])),
                     "scratch_reached": float(np.mean([reached[("e2gan_scratch", c, sd)] for sd in seeds]))})
    rows.append({"concept": "geometric mean", **{f"vs_{n}": ci_text(out[f"flops_ratio_{n}_to_searched"]["values"])
                                                 for n in ("pix2pix", "scratch")},
                 "searched_reached": float(df[df.arm == "lora_searched"]["reached_to_target"].mean()),
                 "scratch_reached": float(df[df.arm == "e2gan_scratch"]["reached_to_target"].mean())})
    run.save_table(pd.DataFrame(rows), "e2gan_flops_ratios")
    return out


def draw_summary(draws: list[dict], arm: str, arms: dict, searched: dict) -> dict:
    """An arm's rank draws (one per concept and seed): how many distinct, whether all matched the
    searched size, and the arm's mean size over the searched arm's."""
    mine = [d for d in draws if d["arm"] == arm]
    return {"n_distinct": len({tuple(d.get(g, 0) for g in (*CRUCIAL_GROUPS, "rb")) for d in mine}),
            "all_matched": bool(all(d["matched"] for d in mine)),
            "params_ratio_to_searched": arms[arm]["trainable_params"] / searched["trainable_params"]}


def time_ratios(df: pd.DataFrame, seeds, grouping: dict) -> dict:
    """Training seconds to the target (evaluations excluded), pix2pix from scratch over searched LoRA, per
    seed the geometric mean over concepts, as the FLOP ratio. Both sides come from the jobs of one workflow
    run on one machine; wall time under shared cores is noisier than FLOPs."""
    t = df.set_index(["arm", "concept", "seed"])["seconds_to_target"]
    concepts = list(dict.fromkeys(df["concept"]))
    out = {}
    for ref, name in (("pix2pix_scratch", "pix2pix"), ("e2gan_scratch", "scratch")):
        out[f"seconds_ratio_{name}_to_searched"] = sample(
            [geomean([t[(ref, c, sd)] / t[("lora_searched", c, sd)] for c in concepts]) for sd in seeds],
            "seed", **grouping)
    return out


def layer_change(run, changes: pd.DataFrame, seeds, grouping: dict) -> dict:
    """‖ΔW‖/‖W‖ per layer group under the full fine-tune (samples over seeds, means over concepts), and
    the mean over LoRA's crucial groups minus the frozen ResNet blocks'."""
    groups = [g for g in GROUP_PREFIXES if g in changes.columns]
    per = changes.groupby("seed")[groups].mean()
    out = {g: sample([per.loc[sd, g] for sd in seeds], "seed", **grouping) for g in groups}
    crucial = [g for g in groups if g in CRUCIAL_GROUPS]
    gap = sample([per.loc[sd, crucial].mean() - per.loc[sd, "rb"] for sd in seeds], "seed", **grouping)
    rows = [{"group": g, "lora_target": g in CRUCIAL_GROUPS, "rel_change": ci_text(out[g]["values"])} for g in groups]
    run.save_table(pd.DataFrame(rows), "e2gan_layer_change")
    return {"groups": out, "crucial_minus_rb": gap}


def image_grid(run, setup: Setup) -> None:
    """Input, teacher and each arm on held-out test images of each new concept."""
    import matplotlib.pyplot as plt

    cfg = run.cfg
    ckpt = run.out / "checkpoints" / "scratch_baselines"
    seed = cfg.concepts.seeds[0]
    cols = ["input", "teacher", *SCRATCH_ARMS, *FT_ARMS]
    n = cfg.grid.n_images
    rows, equal_steps = [], []
    for concept in cfg.concepts.new:
        test = setup.pairs(concept, "test").subset(range(n))
        imgs = {"input": to_images(test.x), "teacher": to_images(test.y)}
        for arm in SCRATCH_ARMS:
            G = setup.pix2pix() if arm == "pix2pix_scratch" else setup.e2gan()
            G.load_state_dict(torch.load(ckpt / f"{slug(concept)}_{arm}_s{seed}.pt", map_location=setup.device,
                                         weights_only=True))
            imgs[arm] = predict(G, test)
        for arm in FT_ARMS:   # saved by the first seed's fine-tuning job
            imgs[arm] = np.load(run.out.joinpath("checkpoints", *GRID_DIR) / f"{slug(concept)}_{arm}.npy")
        rows += [(concept, i, imgs) for i in range(n)]
    fig, axes = plt.subplots(len(rows), len(cols), figsize=(1.1 * len(cols), 1.1 * len(rows)), squeeze=False)
    for r, (concept, i, imgs) in enumerate(rows):
        for c, col in enumerate(cols):
            ax = axes[r, c]
            ax.imshow(np.clip(imgs[col][i], 0, 1))
            ax.set_xticks([]), ax.set_yticks([])
            if r == 0:
                ax.set_title(col.replace("_", "\n"), fontsize=6)
            if c == 0:
                ax.set_ylabel(concept, fontsize=5)
    fig.tight_layout()
    run.save_figure(fig, "e2gan_image_grid")


