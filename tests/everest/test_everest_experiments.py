"""Experiments: every trained arm runs once per entry of `seeds` and writes samples paired by seed."""
from pathlib import Path

import torch

from papers.everest.experiments import (finetune_arm, knob_finetune, knob_pretrain, label_leak, mean_ci, mean_std,
                                        pair_has_motion, pretrain_dir, run_finetune, run_pretrain, snapshot_name,
                                        static_knob)
from shared.config import load_config
from shared.experiment import Run
from shared.samples import combine, is_sample, sample

CONFIG = Path(__file__).resolve().parents[2] / "papers" / "everest" / "config.yaml"


def smoke_run(tmp_path, experiment, seeds):
    cfg = load_config(CONFIG, "smoke", [f"seeds={seeds}", "pretrain.steps=2", "finetune.steps=2"])
    return Run("everest", experiment, cfg, tmp_path)


def test_arms_write_one_value_per_seed(tmp_path):
    pre = run_pretrain(smoke_run(tmp_path, "pretrain_everest", "[0,1]"), "everest")
    assert pre["seeds"] == [0, 1]
    assert is_sample(pre["loss_final"]) and pre["loss_final"]["unit"] == "seed" and pre["loss_final"]["n"] == 2
    for seed in (0, 1):   # one set of snapshots per seed, where the fine-tunes look for them
        assert (pretrain_dir(smoke_run(tmp_path, "x", "[0,1]"), "everest", seed) / "b100.pt").is_file()
    # the two seeds start from different encoders, so their pre-training losses differ
    assert pre["loss_first"]["values"][0] != pre["loss_first"]["values"][1]
    runs = {arm: finetune_arm(smoke_run(tmp_path, f"finetune_{arm}", "[0,1]"), arm, snapshot_name(1.0))
            for arm in ("everest", "random")}
    for metrics in runs.values():
        assert metrics["top1"]["unit"] == "seed" and metrics["top1"]["n"] == 2
        assert all(0.0 <= v <= 100.0 for v in metrics["top1"]["values"])
    gap = combine([runs["everest"]["top1"], runs["random"]["top1"]], lambda e, r: e - r)
    assert gap["values"] == [e - r for e, r in zip(runs["everest"]["top1"]["values"], runs["random"]["top1"]["values"])]


def test_mean_std_shows_n_and_no_std_at_one_seed():
    assert mean_std(sample([90.0, 92.0, 94.0], "seed")) == "92.0 ± 2.0 (n=3)"
    assert mean_std(sample([87.75], "seed")) == "87.8 ± – (n=1)"


def test_mean_ci_shows_the_ledger_interval():
    assert mean_ci(sample([90.0, 92.0, 94.0], "seed")) == "92.0 [88.6, 95.4] (n=3)"
    assert mean_ci(sample([87.75], "seed")) == "87.8 (n=1)"


def test_pair_has_motion():
    moving = torch.zeros(1, 8, 4, 4, dtype=torch.bool)
    moving[0, 2:4, 0, 0] = True                 # the digit appears in slice 1 and leaves in slice 2
    assert pair_has_motion(moving).tolist() == [[True, True, True, False]]


def test_frame_arms_and_label_leak_write_paired_samples(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELS_FORCE_REFERENCE", "1")   # the scores kernel has its own tests
    pre = run_pretrain(smoke_run(tmp_path, "pretrain_everest_selected_frames", "[0,1,2]"), "everest_selected_frames")
    frac = pre["motion_pair_fraction"]
    assert frac["unit"] == "seed" and frac["n"] == 3 and all(0.0 <= v <= 1.0 for v in frac["values"])
    leak = label_leak(smoke_run(tmp_path, "label_leak", "[0,1,2]"))
    assert leak["keep30"]["class_accuracy"]["n"] == 3 and leak["chance"]["class"] == 25.0
    worst = [max(abs(a), abs(b)) for a, b in zip(leak["keep30"]["class_above_chance"]["values"],
                                                 leak["keep60"]["class_above_chance"]["values"])]
    assert leak["class_max_distance_to_chance"]["values"] == worst


def test_static_knob_trains_the_other_points_and_pairs_them_with_the_main_world(tmp_path):
    """knob_pretrain/knob_finetune train every knob point but the first (the main world, whose
    arms are the main experiments'); static_knob writes knob samples paired by seed, readers included."""
    seeds = "[0,1]"
    for arm in ("videomae", "everest"):
        run_pretrain(smoke_run(tmp_path, f"pretrain_{arm}", seeds), arm)
        knob = knob_pretrain(smoke_run(tmp_path, f"knob_pretrain_{arm}", seeds), arm)
        assert sorted(knob) == ["static100", "static50"]
        assert (pretrain_dir(smoke_run(tmp_path, "x", seeds), arm, 0, 0.5) / "b100.pt").is_file()
    for arm in ("videomae", "everest_full", "everest"):
        run = smoke_run(tmp_path, f"finetune_{arm}", seeds)
        run.save_metrics(run_finetune(run, arm))
        run = smoke_run(tmp_path, f"knob_finetune_{arm}", seeds)
        out = knob_finetune(run, arm)
        assert out["static50"]["top1"]["n"] == 2
        run.save_metrics(out)
    out = static_knob(smoke_run(tmp_path, "static_knob", seeds))
    assert out["points"] == [0.0, 0.5, 1.0]
    curve = out["everest_minus_videomae"]
    assert curve["knob"] == "static_share" and [s["n"] for s in curve["samples"]] == [2, 2, 2]
    assert curve["samples"][0]["values"] == [e - v for e, v in zip(out["top1"]["everest"]["samples"][0]["values"],
                                                                    out["top1"]["videomae"]["samples"][0]["values"])]
    gated = out["top1"]["motion_gated"]["samples"]
    assert all(v >= 80.0 for s in gated for v in s["values"])   # the ceiling reads every bit of the world
    assert (tmp_path / "tables" / "static_knob.md").is_file()
