"""The static-context knob (`static_knob`): EVEREST against VideoMAE, and the cost of pruning, as the
share of the class carried by static content grows (`knob.static_share`, `data.py`), beside two
training-free readers (`readers.py`): the motion-gated reader (ceiling) and the motion-blind reader
(floor). The first point is the main world (its arms are `finetune_<arm>`), the others come from
`knob_finetune_<arm>`. Every curve is a `shared.samples.knob`: one sample over seeds per point,
paired by seed across points and arms.
"""
from __future__ import annotations

from shared.io import read_json
from shared.samples import gap, knob, sample

from ..readers import reader_accuracy
from .common import (KNOB_FINETUNE_ARMS, KNOB_PROCEDURAL_ONLY, at_point, dataset, knob_points, mean_ci, point_dir,
                     seeds_of)

READERS = {"motion_gated": True, "motion_blind": False}
KNOB_GAPS = {"everest_minus_videomae": ("everest", "videomae"),          # the paper's headline, along the knob
             "everest_minus_everest_full": ("everest", "everest_full"),  # the cost of top-60% pruning
             "everest_minus_motion_blind": ("everest", "motion_blind"),  # the floor
             "motion_gated_minus_everest": ("motion_gated", "everest")}  # the ceiling's lead


def static_knob(run) -> dict:
    import pandas as pd

    cfg = run.cfg
    if cfg.data.source != "procedural" or cfg.data.appearance != "intensity":
        reason = KNOB_PROCEDURAL_ONLY + "; the readers decode the intensity world"
        run.save_table(pd.DataFrame([{"static_knob": "not run", "reason": reason}]), "static_knob")
        run.save_figure(_not_run_figure(reason), "static_knob")
        return {"skipped": True, "reason": reason}
    points = knob_points(cfg)
    top1 = {}   # arm -> one sample per point
    for arm in KNOB_FINETUNE_ARMS:
        main = read_json(run.out / "metrics" / f"finetune_{arm}.json")["top1"]
        other = read_json(run.out / "metrics" / f"knob_finetune_{arm}.json")
        top1[arm] = [main] + [other[point_dir(p)]["top1"] for p in points[1:]]
    for name, motion_gated in READERS.items():
        top1[name] = [sample([reader_accuracy(dataset(at_point(cfg, p), seed, "test"), p, motion_gated)
                              for seed in seeds_of(cfg)], "seed") for p in points]
    out = {"points": points, "top1": {a: knob("static_share", points, s) for a, s in top1.items()}}
    for name, (a, b) in KNOB_GAPS.items():
        out[name] = knob("static_share", points, [gap(x, y) for x, y in zip(top1[a], top1[b])])
    rows = [{"static share": p, **{a: mean_ci(top1[a][j]) for a in top1},
             **{f"{a} − {b}": mean_ci(out[name]["samples"][j]) for name, (a, b) in KNOB_GAPS.items()}}
            for j, p in enumerate(points)]
    run.save_table(pd.DataFrame(rows), "static_knob")
    run.save_figure(_figure(points, top1), "static_knob")
    return out


def _figure(points, top1):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.4))
    for arm, samples in top1.items():
        style = "--" if arm in READERS else "-"
        ax.errorbar(points, [s["mean"] for s in samples], yerr=[s["std"] or 0.0 for s in samples], ls=style,
                    marker="o", capsize=3, label=arm)
    ax.set(xlabel="share of the class carried by static content", ylabel="test top-1 (%)", ylim=(0, 102))
    ax.axhline(25.0, color="grey", lw=0.8, ls=":")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _not_run_figure(reason: str):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 1.2))
    ax.axis("off")
    ax.text(0.5, 0.5, f"static-context knob not run: {reason}", ha="center", va="center", fontsize=7, wrap=True)
    return fig
