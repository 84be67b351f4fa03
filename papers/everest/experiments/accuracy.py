"""The accuracy tables (`accuracy`): the 2×2, every arm, the paired gaps the claims test, the
frame-selection ablation, the lr each arm chose from the grid, and the budget curve (top-1 of VideoMAE
and EVEREST at every pre-training length; EVEREST at the shortest against VideoMAE at the longest)."""
from __future__ import annotations

from shared.io import read_json
from shared.samples import gap

from .common import BUDGET_ARMS, FINETUNE_ARMS, FRAME_ARMS, PRETRAIN_ARMS, budget_steps, mean_ci

LABELS = {"videomae": "VideoMAE pre-train, all tokens (VideoMAE)",
          "videomae_pruned": "VideoMAE pre-train, top-60% FT",
          "everest_full": "EVEREST pre-train, all tokens",
          "everest": "EVEREST pre-train, top-60% FT (EVEREST)",
          "random": "EVEREST pre-train, random-60% FT",
          "ascending": "ascending pre-train, top-60% FT",
          "scratch": "no pre-training, top-60% FT",
          "everest_uniform_frames": "EVEREST, uniform frame pairs",
          "everest_selected_frames": "EVEREST, information-intensive frame pairs"}
# the paired gaps (a − b, per seed) that the claims and tables read
GAPS = {"everest_full_minus_videomae": ("everest_full", "videomae"),          # pre-training, all-token FT
        "everest_minus_videomae_pruned": ("everest", "videomae_pruned"),      # pre-training, top-60% FT
        "everest_minus_everest_full": ("everest", "everest_full"),            # pruning, EVEREST pre-training
        "videomae_pruned_minus_videomae": ("videomae_pruned", "videomae"),    # pruning, VideoMAE pre-training
        "everest_minus_videomae": ("everest", "videomae"),                    # the two full recipes
        "everest_minus_random": ("everest", "random"),
        "everest_minus_ascending": ("everest", "ascending"),
        "everest_minus_scratch": ("everest", "scratch"),
        "videomae_pruned_minus_scratch": ("videomae_pruned", "scratch"),   # VideoMAE's own floor
        "selected_minus_uniform_frames": ("everest_selected_frames", "everest_uniform_frames")}


def accuracy(run) -> dict:
    import pandas as pd

    m = {arm: read_json(run.out / "metrics" / f"finetune_{arm}.json") for arm in FINETUNE_ARMS}
    m = {arm: v for arm, v in m.items() if not v.get("skipped")}   # procedural-only arms, on real videos
    top1 = {arm: m[arm]["top1"] for arm in m}
    gaps = {name: gap(top1[a], top1[b])   # paired by seed
            for name, (a, b) in GAPS.items() if a in top1 and b in top1}
    grid = [{"pre-training": pre, **{ft: mean_ci(top1[arm]) for ft, arm in cols}}
            for pre, cols in [("VideoMAE (tube)", [("all tokens", "videomae"), ("top-60% pruned", "videomae_pruned")]),
                              ("EVEREST", [("all tokens", "everest_full"), ("top-60% pruned", "everest")])]]
    run.save_table(pd.DataFrame(grid), "accuracy_2x2")
    rows = [{"arm": LABELS[a], "pre-train": PRETRAIN_ARMS[m[a]["pretrained"]][0] if m[a]["pretrained"] else "none",
             "fine-tune tokens": m[a]["tokens"], "fine-tune pruning": m[a]["prune"],
             "fine-tune lr": f"{m[a]['lr']['chosen']:g}" + (" (grid edge)" if m[a]["lr"].get("at_edge") else ""),
             "top-1 (%), mean [90% CI]": mean_ci(top1[a])} for a in LABELS if a in top1]
    run.save_table(pd.DataFrame(rows), "accuracy")
    run.save_table(pd.DataFrame([{"gap (paired by seed)": f"{a} − {b}", "top-1 points, mean [90% CI]": mean_ci(g)}
                                 for (a, b), g in zip(GAPS.values(), gaps.values())]), "accuracy_gaps")
    frame_rows = []
    for arm in FRAME_ARMS:
        pre = read_json(run.out / "metrics" / f"pretrain_{arm}.json")
        if pre.get("skipped") or arm not in top1:
            frame_rows.append({"pre-training frame pairs": PRETRAIN_ARMS[arm][1], "not run": pre.get("reason", "")})
            continue
        frame_rows.append({"pre-training frame pairs": PRETRAIN_ARMS[arm][1],
                           "chosen pairs with motion": mean_ci(pre["motion_pair_fraction"], 3),
                           "candidate pairs with motion": mean_ci(pre["candidate_motion_fraction"], 3),
                           "top-1 (%), top-60% FT": mean_ci(top1[arm])})
        gaps[f"{arm}_motion_pair_fraction"] = pre["motion_pair_fraction"]
    run.save_table(pd.DataFrame(frame_rows), "frame_selection")
    tuned = [a for a in top1 if "val_top1" in m[a]["lr"]]
    lrs = sorted({g for a in tuned for g in m[a]["lr"]["grid"]})   # the grid and the points beyond it that ran
    lr_rows = [{"arm": a, **{f"val top-1 at lr {g:g}": dict(zip(m[a]["lr"]["grid"], m[a]["lr"]["val_top1"])).get(g, "–")
                             for g in lrs},   # –: not run
                "chosen lr": m[a]["lr"]["chosen"],
                "val top-1 per seed at it": " / ".join(f"{v:.1f}" for v in m[a]["lr"].get("val_top1_by_seed", [])),
                "beyond the edge": ", ".join(f"{g:g}" for g in m[a]["lr"].get("extended", [])) or "–",
                "grid edge": m[a]["lr"]["at_edge"]} for a in tuned]   # tuned on: seed 0's validation clips
    run.save_table(pd.DataFrame(lr_rows or [{"lr grid": "empty: every arm at finetune.lr"}]), "finetune_lr")
    out = {arm: {"top1": top1[arm], "lr": m[arm]["lr"]} for arm in top1}
    out.update(gaps)
    out.update(budget_curve(run, top1, pd))
    if all(f"{a}_motion_pair_fraction" in gaps for a in FRAME_ARMS):
        out["selected_minus_uniform_motion_pairs"] = gap(
            gaps["everest_selected_frames_motion_pair_fraction"], gaps["everest_uniform_frames_motion_pair_fraction"])
    return out


def budget_curve(run, top1: dict, pd) -> dict:
    """Table `budget_curve` and the samples of the budget curve: {budget_curve: {steps, <arm>: [sample per
    length]}, everest_shortest_minus_videomae_longest: gap paired by seed}."""
    steps = budget_steps(run.cfg)
    curve = {"steps": steps}
    for arm in BUDGET_ARMS:
        shorter = read_json(run.out / "metrics" / f"budget_finetune_{arm}.json")
        curve[arm] = [shorter[f"steps{n}"]["top1"] for n in steps[:-1]] + [top1[arm]]
    rows = [{"pre-training steps": n, "fraction": n / steps[-1],
             **{f"{LABELS[arm]} top-1 (%)": mean_ci(curve[arm][j]) for arm in BUDGET_ARMS}}
            for j, n in enumerate(steps)]
    run.save_table(pd.DataFrame(rows), "budget_curve")
    return {"budget_curve": curve,
            "everest_shortest_minus_videomae_longest": gap(curve["everest"][0], curve["videomae"][-1])}
