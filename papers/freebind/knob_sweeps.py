"""The fragile claim along two world knobs: the U-visibility of the audio-only envelope and the loudness
reliability of the audio-text experts' captions.

fragile_p<i>  one visibility (`fragile.visibility[i]`), every reliability in `fragile.reliability`, over
              `fragile.seeds`. The point at the default world (default visibility and reliability) is
              read from the bonds_s<i> runs of the same seeds; within a job U is trained once per seed
              (no reliability changes it) and shared by the reliabilities.
fragile       text→audio R@1 of the bond, the experts and the references at each grid point, as
              per-seed samples paired by seed across points; knob samples along visibility (one per
              reliability) and along reliability (one per visibility) for the knob claims.

Why a second knob: the bonded space can beat the expert only with knowledge the expert lacks. At
reliability 0 the experts never hear loudness named and U (which learns intensity from image brightness)
can add it; at reliability 1 the experts know loudness themselves.
"""
from __future__ import annotations

import pandas as pd

from shared.io import read_json
from shared.samples import gap as paired_gap, knob

from .evaluation import seed_sample
from .summaries import fmt, interval_cols, seed_results

N_FRAGILE_JOBS = 3
ARMS = ("U", "E1", "E2", "c_E1_mop_ATE", "parallel_ATE", "late_fusion_ATE", "experts_avg")


def key(prefix: str, value: float) -> str:
    """`vis50`, `rel100`: a knob point's metrics key."""
    return f"{prefix}{round(100 * float(value))}"


def fragile_point(index: int, run) -> dict:
    """One visibility of the grid, every reliability, over `fragile.seeds`."""
    f, cfg = run.cfg.fragile, run.cfg
    if index >= len(f.visibility):
        return {"skipped": True, "reason": f"profile {run.profile} sweeps {len(f.visibility)} visibilities"}
    if run.profile == "full":
        return {"skipped": True, "reason": "the full profile has no visibility knob"}
    vis = float(f.visibility[index])
    default = (float(cfg.world.envelope_visibility), float(cfg.spaces.at_intensity_reliability))
    points = []
    for rel in map(float, f.reliability):
        if (vis, rel) == default:
            missing = [s for s in f.seeds if s not in cfg.seeds]
            if missing:
                raise ValueError(f"fragile.seeds {missing} are not in seeds {list(cfg.seeds)}: the default world's "
                                 "point reuses the bonds_s<i> runs of the same seeds")
            points.append({"reliability": rel, "from_main_seeds": True})
            continue
        from .pipeline import run_fragile

        points.append({"reliability": rel, "from_main_seeds": False,
                       "runs": [run_fragile(cfg, int(seed), vis, run.checkpoint_dir(f"seed{seed}"), reliability=rel)
                                for seed in f.seeds]})
    return {"visibility": vis, "points": points}


def _runs(run, vis: float, point: dict) -> list[dict]:
    """The per-seed rows of one grid point, in `fragile.seeds` order (paired by seed across points)."""
    if not point["from_main_seeds"]:
        return point["runs"]
    by_seed = {s["seed"]: s for s in seed_results(run)}
    return [{"visibility": vis, "seed": seed, "rows": by_seed[seed]["rows"]} for seed in run.cfg.fragile.seeds]


def _summary(rs: list[dict], vis: float, rel: float, from_main: bool) -> dict:
    arms = {name: seed_sample([r["rows"][name]["at_r1"] for r in rs]) for name in ARMS if name in rs[0]["rows"]}
    best = seed_sample([max(r["rows"]["E1"]["at_r1"], r["rows"]["E2"]["at_r1"]) for r in rs])
    out = {"visibility": vis, "reliability": rel, "from_main_seeds": from_main, **arms, "best_expert": best,
           "gap_parallel_vs_best_expert": paired_gap(arms["parallel_ATE"], best),
           "gap_single_vs_E1": paired_gap(arms["c_E1_mop_ATE"], arms["E1"])}
    if "late_fusion_ATE" in arms:
        out["gap_parallel_vs_late_fusion"] = paired_gap(arms["parallel_ATE"], arms["late_fusion_ATE"])
    return out


SWEPT = ("gap_parallel_vs_best_expert", "parallel_ATE", "best_expert", "late_fusion_ATE", "gap_parallel_vs_late_fusion")


def fragile(run) -> dict:
    """Text→audio R@1 of each arm per (visibility, reliability), as per-seed samples over `fragile.seeds`.

    Metrics: `grid.<rel>.<vis>` every point; `sweep` (along visibility at the default reliability, the
    paper's world), `sweep_<rel>` (along visibility at each other reliability), `reliability.<vis>`
    (along reliability at each visibility), each a knob sample per arm and gap. The default
    reliability's points also sit at the top level (`vis0`, `vis50`, ...), as before the second knob."""
    jobs = [read_json(run.out / "metrics" / f"fragile_p{i}.json") for i in range(N_FRAGILE_JOBS)]
    jobs = [j for j in jobs if not j.get("skipped")]
    grid: dict[str, dict[str, dict]] = {}
    for job in jobs:
        for point in job["points"]:
            s = _summary(_runs(run, job["visibility"], point), job["visibility"], point["reliability"],
                         point["from_main_seeds"])
            grid.setdefault(key("rel", point["reliability"]), {})[key("vis", job["visibility"])] = s
    default_rel = key("rel", run.cfg.spaces.at_intensity_reliability)
    out: dict = {**grid.get(default_rel, {}), "grid": grid}

    def along_visibility(points: dict) -> dict:
        order = sorted(points, key=lambda k: points[k]["visibility"])
        return {name: knob("visibility", [points[k]["visibility"] for k in order], [points[k][name] for k in order])
                for name in SWEPT if all(name in points[k] for k in order)}

    for rel, points in grid.items():
        if len(points) >= 2:
            out["sweep" if rel == default_rel else f"sweep_{rel}"] = along_visibility(points)
    if default_rel in grid and len(grid[default_rel]) >= 2:
        ends = sorted(grid[default_rel].values(), key=lambda v: v["visibility"])
        out["gap_rise"] = paired_gap(ends[-1]["gap_parallel_vs_best_expert"], ends[0]["gap_parallel_vs_best_expert"])
    rels = sorted(grid, key=lambda r: next(iter(grid[r].values()))["reliability"])
    if len(rels) >= 2:
        out["reliability"] = {}
        for vis in grid[rels[0]]:
            if all(vis in grid[r] for r in rels):
                pts = [grid[r][vis] for r in rels]
                out["reliability"][vis] = {
                    name: knob("reliability", [p["reliability"] for p in pts], [p[name] for p in pts])
                    for name in SWEPT if all(name in p for p in pts)}
    _figure(run, grid, rels)
    df = pd.DataFrame([{"reliability": v["reliability"], "visibility": v["visibility"],
                        **{k: fmt(v.get(k)) for k in ARMS}, "parallel − best expert": fmt(v["gap_parallel_vs_best_expert"]),
                        "parallel − late fusion": fmt(v.get("gap_parallel_vs_late_fusion")),
                        "n (seeds)": v["parallel_ATE"]["n"]}
                       for r in rels for v in sorted(grid[r].values(), key=lambda p: p["visibility"])])
    run.save_table(df, "fragile_claim")
    return out


def _figure(run, grid: dict, rels: list[str]) -> None:
    """Left: text→audio R@1 per arm along visibility (one panel line style per reliability). Right: the
    paired gap to the better expert with its 90% interval and the seeds, per reliability."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    styles = ["-", "--", ":", "-."]
    for i, rel in enumerate(rels):
        pts = sorted(grid[rel].values(), key=lambda v: v["visibility"])
        vis = [p["visibility"] for p in pts]
        r_label = f"rel {pts[0]['reliability']:g}"
        for name, label, colour in (("parallel_ATE", "U + c(E1,E2) AT-E", "C0"), ("late_fusion_ATE", "late fusion", "C1"),
                                    ("E1", "expert E1", "C2"), ("E2", "expert E2", "C3"), ("U", "U", "C4")):
            if name in pts[0]:
                axes[0].errorbar(vis, [p[name]["mean"] for p in pts], yerr=[p[name]["std"] or 0.0 for p in pts],
                                 marker="o", capsize=3, color=colour, linestyle=styles[i % 4],
                                 label=f"{label} ({r_label})")
        gaps = [p["gap_parallel_vs_best_expert"] for p in pts]
        ivs = [interval_cols(g) for g in gaps]
        means = [g["mean"] for g in gaps]
        lo = [m - (iv["90% lo"] if iv["90% lo"] is not None else m) for m, iv in zip(means, ivs)]
        hi = [(iv["90% hi"] if iv["90% hi"] is not None else m) - m for m, iv in zip(means, ivs)]
        offset = 0.015 * (i - (len(rels) - 1) / 2)
        axes[1].errorbar([v + offset for v in vis], means, yerr=[lo, hi], marker="o", capsize=4,
                         linestyle=styles[i % 4], label=r_label)
        for g, x in zip(gaps, vis):
            axes[1].scatter([x + offset] * len(g["values"]), g["values"], s=10, alpha=0.5)
    axes[0].set_xlabel("U-visibility of the audio-only attribute (P[envelope = colour])")
    axes[0].set_ylabel("text→audio R@1 (%), mean ± std (ddof 1)")
    axes[0].set_title("Fragile claim: bonded vs expert, per loudness reliability")
    axes[0].legend(fontsize=6, ncol=2)
    axes[1].axhline(0, color="grey", lw=0.8)
    axes[1].set_xlabel("U-visibility of the audio-only attribute")
    axes[1].set_ylabel("parallel − best expert, R@1 (points)")
    axes[1].set_title("paired gap: mean, 90% interval, seeds")
    axes[1].legend(fontsize=8, title="experts' loudness reliability")
    fig.tight_layout()
    run.save_figure(fig, "fragile_claim")
