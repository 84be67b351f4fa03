"""Camera pan on and off (`camera_pan`): VideoMAE and EVEREST pre-trained, fine-tuned and tested in a
world whose camera pans (`data.pan_speed` := `camera_pan.pan_speed` pixels per frame, a random direction
per clip: background and distractor shift, so every token moves), beside the main world (pan off, the
arms of `finetune_videomae` / `finetune_everest`). Each recipe as the paper's: VideoMAE fine-tunes on all
tokens, EVEREST on the top 60%; each at the lr its main-world fine-tune chose. Weights under
checkpoints/camera_pan/. Every top-1 is a sample over seeds, paired by seed across pan off and on; the
table is a report, no claim reads it (the experiment costs more than a claim may add at tiny).
"""
from __future__ import annotations

from shared.io import read_json
from shared.samples import gap, knob

from .common import mean_ci, snapshot_name, with_data
from .finetuning import chosen_lr, finetune_arm
from .pretraining import pretrain_arm

WORLD = "camera_pan"
PAN_ARMS = ("videomae", "everest")   # fine-tune arm = pre-training arm (VideoMAE all tokens, EVEREST top 60%)
PAN_PROCEDURAL_ONLY = "camera pan is a parameter of the procedural world (smoke, tiny)"


def camera_pan(run) -> dict:
    import pandas as pd

    cfg = run.cfg
    if cfg.data.source != "procedural":
        run.save_table(pd.DataFrame([{"camera_pan": "not run", "reason": PAN_PROCEDURAL_ONLY}]), WORLD)
        return {"skipped": True, "reason": PAN_PROCEDURAL_ONLY}
    speeds = [float(cfg.data.pan_speed), float(cfg.camera_pan.pan_speed)]
    if speeds[1] <= speeds[0]:
        raise ValueError(f"camera_pan.pan_speed={speeds[1]} must exceed the main world's data.pan_speed={speeds[0]}")
    pan_cfg = with_data(cfg, pan_speed=speeds[1])
    snapshot = snapshot_name(cfg.pretrain.budgets[-1])
    top1, pre = {}, {}
    for arm in PAN_ARMS:
        pre[arm] = pretrain_arm(run, pan_cfg, arm, f"pretrain_{arm}")
        on = finetune_arm(run, arm, snapshot, f"finetune_{arm}", pan_cfg, lr=chosen_lr(run, arm), world=WORLD)
        off = read_json(run.out / "metrics" / f"finetune_{arm}.json")
        top1[arm] = [off["top1"], on["top1"]]
    gaps = [gap(e, v) for e, v in zip(top1["everest"], top1["videomae"])]
    rows = [{"camera pan (px / frame)": s, **{f"{a} top-1 (%)": mean_ci(top1[a][j]) for a in PAN_ARMS},
             "everest − videomae": mean_ci(gaps[j])} for j, s in enumerate(speeds)]
    run.save_table(pd.DataFrame(rows), WORLD)
    return {"pan_speed": speeds, "top1": {a: knob("pan_speed", speeds, s) for a, s in top1.items()},
            "everest_minus_videomae": knob("pan_speed", speeds, gaps),
            "pretrain_loss_final": {a: pre[a]["loss_final"] for a in PAN_ARMS}}
