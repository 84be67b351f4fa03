"""The label-leak control (`label_leak`): linear probes on the keep mask alone read the class (should be
chance) and the motion direction (the probe's positive control)."""
from __future__ import annotations

from shared.samples import combine, sample
from shared.seeding import derive_seed

from ..data import make_clips, num_motions
from ..leak import keep_masks, probe_accuracy
from .common import classes, mean_ci, seeds_of


def label_leak(run) -> dict:
    """Linear probes on the binary keep mask of pixel-difference scores, per seed and keep ratio:
    the class (the moving digit's appearance; chance 1/classes) and the motion direction (positive control)."""
    import pandas as pd

    cfg = run.cfg
    if cfg.data.source != "procedural":   # real videos (full): no motion labels to probe for
        reason = "the probe needs the procedural clips' class and motion labels of every clip (smoke, tiny)"
        run.save_table(pd.DataFrame([{"label_leak": "not run", "reason": reason}]), "label_leak")
        return {"skipped": True, "reason": reason}
    lk, m = cfg.leak, cfg.model
    chance = {"class": 100.0 / classes(cfg), "motion": 100.0 / num_motions(cfg.data.patterns)}
    acc = {}   # (keep, target) -> one accuracy per seed
    for seed in seeds_of(cfg):
        train = make_clips(lk.n_train, derive_seed(seed, "probe-train"), **cfg.data)
        test = make_clips(lk.n_test, derive_seed(seed, "probe-test"), **cfg.data)
        for keep in lk.keep_ratios:
            x_train, x_test = (keep_masks(c.video, keep, m.patch, m.tubelet) for c in (train, test))
            for target in ("class", "motion"):
                y_train, y_test = ((c.labels if target == "class" else c.motion).numpy() for c in (train, test))
                acc.setdefault((keep, target), []).append(probe_accuracy(x_train, y_train, x_test, y_test))
    out, rows = {}, []
    for (keep, target), values in acc.items():
        name = f"keep{round(100 * keep)}"
        out.setdefault(name, {})[f"{target}_accuracy"] = sample(values, "seed")
        out[name][f"{target}_above_chance"] = sample([v - chance[target] for v in values], "seed")
        rows.append({"keep": keep, "probe target": target, "chance (%)": chance[target],
                     "probe accuracy (%), mean [90% CI]": mean_ci(out[name][f"{target}_accuracy"])})
    keeps = [f"keep{round(100 * k)}" for k in lk.keep_ratios]
    # the claims: the class probe's largest distance from chance, and the motion probe's smallest lead
    out["class_max_distance_to_chance"] = combine([out[k]["class_above_chance"] for k in keeps],
                                                  lambda *g: max(abs(x) for x in g))
    out["motion_min_above_chance"] = combine([out[k]["motion_above_chance"] for k in keeps], lambda *g: min(g))
    out["chance"] = chance
    run.save_table(pd.DataFrame(rows), "label_leak", floatfmt=".1f")
    return out
