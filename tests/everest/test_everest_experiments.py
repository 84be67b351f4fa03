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


def smoke_run(tmp_path, experiment, seeds, *overrides):
    cfg = load_config(CONFIG, "smoke", [f"seeds={seeds}", "pretrain.steps=2", "finetune.steps=2", *overrides])
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


def test_frame_arms_and_label_leak_write_paired_samples(tmp_path):
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
    seeds, one_lr = "[0,1]", "finetune.lr_grid=[0.003]"   # a grid of one: the lr choice has its own test
    for arm in ("videomae", "everest"):
        run_pretrain(smoke_run(tmp_path, f"pretrain_{arm}", seeds), arm)
        knob = knob_pretrain(smoke_run(tmp_path, f"knob_pretrain_{arm}", seeds), arm)
        assert sorted(knob) == ["static100", "static50"]
        assert (pretrain_dir(smoke_run(tmp_path, "x", seeds), arm, 0, 0.5) / "b100.pt").is_file()
    for arm in ("videomae", "everest_full", "everest"):
        run = smoke_run(tmp_path, f"finetune_{arm}", seeds, one_lr)
        run.save_metrics(run_finetune(run, arm))
        run = smoke_run(tmp_path, f"knob_finetune_{arm}", seeds, one_lr)
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


def test_every_arm_chooses_its_lr_from_one_grid_on_validation_clips(tmp_path, monkeypatch):
    """The first seed runs at every lr of the grid and is scored on validation clips; the best (a tie to
    the lower validation NLL, then the smaller lr) is kept; an edge that beats its neighbour outright runs
    once beyond itself (`finetune.lr_extend`); the first seed's result is that run's and the other seeds run at it; the
    record says whether the choice lies on the edge of what ran."""
    from papers.everest.experiments import finetuning

    calls = []
    scores = {0.001: 30.0, 0.003: 40.0, 0.01: 55.0, 0.03: 55.0, 0.1: 20.0}
    nll = {g: 1.0 for g in scores}

    def fake(run, arm, snapshot, prune, seed, subdir, cfg=None, point=None, steps=None, val=False, world=None):
        lr = float(cfg.finetune.lr)
        calls.append((seed, lr, subdir, val))
        return {"top1": 100 * seed + 1000 * lr, "val_top1": scores[lr], "val_nll": nll[lr], "loss": 0.0,
                "tokens": 128, "schedule": {}}

    def arm(seeds="[0,1]", **kw):
        return finetuning.finetune_arm(smoke_run(tmp_path, "finetune_everest", seeds), "everest", "b100", **kw)

    monkeypatch.setattr(finetuning, "finetune_seed", fake)
    out = arm("[0,1,2]")
    assert out["lr"]["grid"] == [0.003, 0.01, 0.03] and out["lr"]["val_top1"] == [40.0, 55.0, 55.0]
    assert out["lr"]["chosen"] == 0.01 and out["lr"]["at_edge"] is False and out["lr"]["extended"] == []
    assert [c[:2] for c in calls] == [(0, 0.003), (0, 0.01), (0, 0.03), (1, 0.01), (2, 0.01)]
    assert all(c[3] for c in calls)      # validation clips score every seed of a tuned arm
    assert out["lr"]["val_top1_by_seed"] == [55.0, 55.0, 55.0]
    assert out["top1"]["values"] == [10.0, 110.0, 210.0]                         # seed 0: the chosen grid run
    assert len({c[2] for c in calls[:3]}) == 3                                   # one checkpoint folder per lr
    nll[0.03] = 0.9                                  # a tie in top-1 goes to the lower validation NLL; an edge
    out = arm()                                      # that only ties its neighbour does not extend the grid
    assert out["lr"]["chosen"] == 0.03 and out["lr"]["extended"] == [] and out["lr"]["at_edge"] is True
    nll[0.03] = 1.0
    scores[0.03] = 60.0                              # the top edge wins: one run beyond it, which loses
    calls.clear()
    out = arm()
    assert [c[:2] for c in calls] == [(0, 0.003), (0, 0.01), (0, 0.03), (0, 0.1), (1, 0.03)] and calls[3][3]
    assert out["lr"]["chosen"] == 0.03 and out["lr"]["at_edge"] is False and out["lr"]["extended"] == [0.1]
    assert out["lr"]["grid"] == [0.003, 0.01, 0.03, 0.1] and out["lr"]["val_top1"][-1] == 20.0
    scores[0.1] = 65.0                               # ... and when the point beyond wins, it is still an edge
    out = arm()
    assert out["lr"]["chosen"] == 0.1 and out["lr"]["at_edge"] is True
    scores.update({0.003: 70.0, 0.03: 50.0})         # the bottom edge is an edge too
    out = arm()
    assert out["lr"]["chosen"] == 0.003 and out["lr"]["extended"] == [0.001] and out["lr"]["at_edge"] is False
    out = finetuning.finetune_arm(smoke_run(tmp_path, "finetune_everest", "[0,1]", "finetune.lr_grid=[0.003]"),
                                  "everest", "b100")     # a grid of one has no edge to extend
    assert out["lr"]["grid"] == [0.003] and out["lr"]["extended"] == [] and out["lr"]["at_edge"] is False
    calls.clear()   # a given lr (the knob's and the budget curve's fine-tunes): no tuning
    out = arm(lr=0.003)
    assert [c[:2] for c in calls] == [(0, 0.003), (1, 0.003)] and out["lr"]["chosen"] == 0.003
    assert not any(c[3] for c in calls) and "val_top1_by_seed" not in out["lr"]


def test_budget_curve_pretrains_each_shorter_length_and_fine_tunes_at_the_chosen_lr(tmp_path):
    """budget_pretrain_<arm> pre-trains every shorter length of budget_curve.fractions with its own
    schedule; budget_finetune_<arm> fine-tunes from each at the lr the main world's fine-tune chose;
    accuracy pairs EVEREST at the shortest with VideoMAE at the longest by seed."""
    import pandas as pd

    from papers.everest.experiments import budget_finetune, budget_pretrain
    from papers.everest.experiments.accuracy import budget_curve

    cfg = ["seeds=[0,1]", "pretrain.steps=2", "finetune.steps=1", "finetune.lr_grid=[0.003]",
           "budget_curve.fractions=[0.5,1.0]"]

    def run_of(experiment):
        return Run("everest", experiment, load_config(CONFIG, "smoke", cfg), tmp_path)

    run_pretrain(run_of("pretrain_everest"), "everest")
    pre = budget_pretrain(run_of("budget_pretrain_everest"), "everest")
    assert list(pre) == ["steps1"] and pre["steps1"]["steps"] == 1
    assert (pretrain_dir(run_of("x"), "everest", 1, steps=1) / "b100.pt").is_file()
    run = run_of("finetune_everest")
    run.save_metrics(main := run_finetune(run, "everest"))
    run = run_of("budget_finetune_everest")
    run.save_metrics(curve := budget_finetune(run, "everest"))
    assert curve["steps1"]["lr"]["chosen"] == main["lr"]["chosen"] == 0.003 and curve["steps1"]["top1"]["n"] == 2
    videomae = {"steps1": {"top1": sample([10.0, 20.0], "seed")}}
    run_of("budget_finetune_videomae").save_metrics(videomae)
    top1 = {"videomae": sample([30.0, 50.0], "seed"), "everest": main["top1"]}
    out = budget_curve(run_of("accuracy"), top1, pd)
    shortest = curve["steps1"]["top1"]["values"]
    assert out["everest_shortest_minus_videomae_longest"]["values"] == [shortest[0] - 30.0, shortest[1] - 50.0]
    assert out["budget_curve"]["steps"] == [1, 2] and out["budget_curve"]["videomae"][0]["values"] == [10.0, 20.0]


def test_frame_arms_fine_tune_and_test_on_clips_with_static_stretches(tmp_path, monkeypatch):
    """The frame-selection arms' fine-tuning, validation and test clips carry `frame_selection.finetune_rest`
    (data.rest there); every other arm's clips keep the main world's data.rest."""
    from papers.everest.experiments import finetuning

    seen = {}

    def fake(run, arm, snapshot, prune, seed, subdir, cfg=None, point=None, steps=None, val=False, world=None):
        seen.setdefault(arm, set()).add(float(cfg.data.rest))
        return {"top1": 50.0, "val_top1": 50.0, "loss": 1.0, "tokens": 128, "schedule": {}}

    monkeypatch.setattr(finetuning, "finetune_seed", fake)
    for arm in ("everest_selected_frames", "everest_uniform_frames", "everest", "scratch"):
        finetune_arm(smoke_run(tmp_path, f"finetune_{arm}", "[0,1]", "frame_selection.finetune_rest=0.5"), arm,
                     snapshot_name(1.0))
    assert seen == {"everest_selected_frames": {0.5}, "everest_uniform_frames": {0.5}, "everest": {0.0},
                    "scratch": {0.0}}


def test_motion_clock_rests_in_half_the_windows_of_a_fine_tuning_clip():
    from papers.everest.data import make_clips

    def still_steps(clips):   # frame steps f-1 -> f in which the moving digit does not move
        return (clips.moving[:, 1:] == clips.moving[:, :-1]).flatten(2).all(-1).sum(-1).tolist()

    assert set(still_steps(make_clips(8, 0, rest=0.5))) <= {7, 8}   # 2 of the 4 windows at rest
    assert set(still_steps(make_clips(8, 0))) == {0}


def test_camera_pan_trains_both_recipes_with_the_camera_panning(tmp_path):
    """camera_pan pre-trains and fine-tunes VideoMAE and EVEREST with data.pan_speed = camera_pan.pan_speed,
    at each arm's main-world lr, beside the main world's fine-tunes (pan off), paired by seed."""
    from papers.everest.experiments import camera_pan

    seeds, one_lr = "[0,1]", "finetune.lr_grid=[0.003]"
    for arm in ("videomae", "everest"):
        run_pretrain(smoke_run(tmp_path, f"pretrain_{arm}", seeds), arm)
        run = smoke_run(tmp_path, f"finetune_{arm}", seeds, one_lr)
        run.save_metrics(run_finetune(run, arm))
    out = camera_pan(smoke_run(tmp_path, "camera_pan", seeds, one_lr))
    assert out["pan_speed"] == [0.0, 1.0]
    curve = out["everest_minus_videomae"]
    assert curve["knob"] == "pan_speed" and [s["n"] for s in curve["samples"]] == [2, 2]
    assert curve["samples"][1]["values"] == [e - v for e, v in zip(out["top1"]["everest"]["samples"][1]["values"],
                                                                    out["top1"]["videomae"]["samples"][1]["values"])]
    for arm in ("videomae", "everest"):
        assert (tmp_path / "checkpoints" / "camera_pan" / f"pretrain_{arm}" / "seed1" / "b100.pt").is_file()
    assert (tmp_path / "tables" / "camera_pan.md").is_file()


def test_trainings_run_the_attention_the_config_names():
    """`model.fused_attention` switches every attention layer of the arms' initial autoencoder (and so of
    their fine-tuned classifiers); the efficiency tables set their own."""
    from papers.everest.experiments.common import initial_autoencoder
    from papers.everest.model import Attention

    for fused in (True, False):
        cfg = load_config(CONFIG, "smoke", [f"model.fused_attention={fused}"])
        layers = [m for m in initial_autoencoder(cfg, 0).modules() if isinstance(m, Attention)]
        assert layers and all(m.fused is fused for m in layers)
