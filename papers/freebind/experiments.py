"""FreeBind experiments: `fn(run) -> metrics` (see shared.experiment).

bonds_s0..s4  one seed each (`seeds`): train the spaces and the 7 bond MoPs (with the shuffled-pairs
              floor), score every table row and the λ curves (run side by side by Snakemake; spaces
              and bonds are cached under checkpoints/, keyed by config hash and seed)
main_table    paper Tables 3-4 analogue: every cell a per-seed sample (shared.samples), and the
              paired (seed-wise) gaps
lambda_tradeoff  the customised-inference curves (λt: AT vs VT; λa: audio accuracy vs AV)
fragile_p0..p2  one point of the U-visibility sweep each, over `fragile.seeds` (the point at the
              default world's visibility reuses the bonds_s<i> rows of those seeds instead)
fragile       bonded vs expert text→audio R@1 across the U-visibility knob
cost          trainable parameters and training time of the bonds vs retraining the unified space
"""
from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd

from shared.io import read_json
from shared.samples import gap as paired_gap, knob, sample

from .evaluation import COLUMNS, seed_sample

N_SEED_JOBS = 5
N_FRAGILE_JOBS = 3
ROW_LABELS = {
    "U": "U (unified, 'ImageBind')",
    "E1": "E1 (audio-text expert, 'CLAP_g')",
    "E2": "E2 (audio-text expert, 'CLAP_m')",
    "VT": "VT (image-text expert, 'InternVL-C')",
    "c_E1_single_ATE": "U + c(E1), single projector, AT-E",
    "c_E1_mop_ATE": "U + c(E1), MoP, AT-E",
    "c_E1_shuffled_ATE": "floor: U + c(E1) trained on shuffled pairs, AT-E",
    "parallel_ATE": "U + c(E1, E2) parallel, AT-E",
    "parallel_versatile": "U + c(E1, E2) parallel, Versatile",
    "d_VT_dense": "U + d(VT), dense terms",
    "d_VT_nodense": "U + d(VT), no dense terms",
    "sequential_ATE": "U + d(VT) + c(E1, E2) sequential, AT-E",
    "sequential_versatile": "U + d(VT) + c(E1, E2) sequential, Versatile",
}


def bonds_seed(index: int, run) -> dict:
    seeds = list(run.cfg.seeds)
    if index >= len(seeds):
        return {"skipped": True, "reason": f"profile {run.profile} has {len(seeds)} seed(s)"}
    if run.profile == "full":  # real embeddings + released projectors: one evaluation, no seeds
        if index:
            return {"skipped": True, "reason": "the full profile evaluates the released projectors once"}
        from .full import evaluate_full

        return {"seed": run.seed, **evaluate_full(run.cfg)}
    from .pipeline import run_seed

    seed = int(seeds[index])
    cfg = run.cfg
    if index != 0:
        cfg = type(cfg).wrap({**cfg, "eval": {**cfg.eval, "save_explore": False}})
    return run_seed(cfg, seed, run.checkpoint_dir())


def _seed_results(run) -> list[dict]:
    """The bonds_s<i> results that ran, in `seeds` order."""
    out = []
    for i in range(N_SEED_JOBS):
        data = read_json(run.out / "metrics" / f"bonds_s{i}.json")
        if not data.get("skipped"):
            out.append(data)
    if not out:
        raise RuntimeError("no bonds_s<i> metrics found: run the bonds_s0 experiment first")
    return out


def _fmt(s: dict | None, digits: int = 1) -> str:
    """A per-seed sample as `mean [lo, hi]`, the 90% interval of the mean the ledger decides on (the
    mean alone under 3 seeds)."""
    if s is None:
        return "–"
    iv = _interval_cols(s)
    if iv["90% lo"] is None:
        return f"{s['mean']:.{digits}f}"
    return f"{s['mean']:.{digits}f} [{iv['90% lo']:.{digits}f}, {iv['90% hi']:.{digits}f}]"


def main_table(run) -> dict:
    """Every cell is a per-seed sample; a gap is the seed-wise (paired) difference of two cells."""
    seeds = _seed_results(run)
    rows = [r for r in ROW_LABELS if r in seeds[0]["rows"]]

    def cell(row, col):
        return seed_sample([s["rows"].get(row, {}).get(col) for s in seeds])

    shown = list(COLUMNS) if run.profile != "full" else sorted({c for r in rows for c in seeds[0]["rows"][r]} - set(COLUMNS))
    cols = shown if run.profile != "full" else shown + list(COLUMNS)  # the claims read the aliases at full
    table = {row: {c: cell(row, c) for c in cols} for row in rows}
    df = pd.DataFrame([{"space / bond": ROW_LABELS[r], **{c: _fmt(table[r][c]) for c in shown}, "n (seeds)": len(seeds)}
                       for r in rows])
    run.save_table(df, "main_table")

    def gap(a_row, a_col, b_row, b_col=None):
        a, b = cell(a_row, a_col), cell(b_row, b_col or a_col)
        return None if a is None or b is None else paired_gap(a, b)

    # the better audio-text expert per seed (the paper's bonded space beats both CLAPs)
    best_expert = {c: seed_sample([max(s["rows"]["E1"][c], s["rows"]["E2"][c]) for s in seeds])
                   for c in ("at_r1", "at_r5", "audio_acc")} if "E2" in rows else {}

    def gap_best(a_row, col):
        a = cell(a_row, col)
        return None if a is None or col not in best_expert else paired_gap(a, best_expert[col])

    gaps = {
        "parallel_vs_best_expert_audio_acc": gap_best("parallel_ATE", "audio_acc"),
        "parallel_vs_best_expert_at_r1": gap_best("parallel_ATE", "at_r1"),
        "parallel_vs_best_expert_at_r5": gap_best("parallel_ATE", "at_r5"),
        "c_mop_vs_E1_audio_acc": gap("c_E1_mop_ATE", "audio_acc", "E1"),
        "parallel_vs_single_expert_audio_acc": gap("parallel_ATE", "audio_acc", "c_E1_mop_ATE"),
        "mop_vs_single_audio_acc": gap("c_E1_mop_ATE", "audio_acc", "c_E1_single_ATE"),
        "shuffled_vs_U_audio_acc": gap("c_E1_shuffled_ATE", "audio_acc", "U"),
        "shuffled_vs_U_at_r1": gap("c_E1_shuffled_ATE", "at_r1", "U"),
        "shuffled_vs_U_av_r1": gap("c_E1_shuffled_ATE", "av_r1", "U"),
        # descriptive (no claim): the trained bond against its shuffled-pairs floor
        "c_mop_vs_shuffled_audio_acc": gap("c_E1_mop_ATE", "audio_acc", "c_E1_shuffled_ATE"),
        "c_mop_vs_shuffled_at_r1": gap("c_E1_mop_ATE", "at_r1", "c_E1_shuffled_ATE"),
        "c_mop_vs_shuffled_av_r1": gap("c_E1_mop_ATE", "av_r1", "c_E1_shuffled_ATE"),
        "disp_dense_vs_U_vt_r5": gap("d_VT_dense", "vt_r5", "U"),
        "disp_dense_vs_U_image_acc": gap("d_VT_dense", "image_acc", "U"),
        "disp_dense_vs_VT_vt_r5": gap("d_VT_dense", "vt_r5", "VT"),
        "disp_dense_vs_VT_image_acc": gap("d_VT_dense", "image_acc", "VT"),
        "disp_dense_vs_U_audio_acc": gap("d_VT_dense", "audio_acc", "U"),
        "disp_nodense_vs_dense_audio_acc": gap("d_VT_nodense", "audio_acc", "d_VT_dense"),
        "sequential_vs_parallel_vt_r5": gap("sequential_ATE", "vt_r5", "parallel_ATE"),
        "sequential_vs_disp_audio_acc": gap("sequential_ATE", "audio_acc", "d_VT_dense"),
    }
    pd_g = pd.DataFrame([{"comparison (seed-wise a − b)": k, "mean": None if v is None else v["mean"],
                          "std (ddof 1)": None if v is None else v["std"], **_interval_cols(v),
                          "n (seeds)": None if v is None else v["n"]} for k, v in gaps.items()])
    run.save_table(pd_g, "main_table_gaps", floatfmt=".2f")
    return {"seeds": [s["seed"] for s in seeds], "table": table, "best_expert": best_expert, "gaps": gaps}


def _interval_cols(s: dict | None) -> dict:
    """The 90% interval of a sample's mean, as the ledger computes it (`shared.intervals`)."""
    from shared.claims import MIN_UNITS
    from shared.intervals import mean_interval

    if s is None or s["n"] < MIN_UNITS or not all(np.isfinite(s["values"])):
        return {"90% lo": None, "90% hi": None}
    lo, hi, _ = mean_interval(s["values"])
    return {"90% lo": lo, "90% hi": hi}


def point_key(lam: float) -> str:
    """The metrics key of one sweep point: λ = 0.25 -> `lam25`."""
    return f"lam{round(100 * float(lam))}"


def _curve(seeds, key, col) -> dict:
    """{point_key(λ): per-seed sample} of one column along a sweep."""
    return {point_key(p["lam"]): seed_sample([s[key][i][col] for s in seeds]) for i, p in enumerate(seeds[0][key])}


def _frac_steps(values, up: bool) -> float:
    """Fraction of one seed's sweep steps that move the claimed way (ties count; values are rounded
    to 1e-9 first, so equal hit counts are ties even if a value was computed in another order)."""
    d = np.diff(np.round(np.asarray(values, dtype=float), 9))
    return float(np.mean(d >= 0 if up else d <= 0))


def lambda_tradeoff(run) -> dict:
    """The λ sweeps of every seed: each point a per-seed sample (the claims pair adjacent points by seed)."""
    import matplotlib.pyplot as plt

    seeds = _seed_results(run)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    out = {}
    for ax, key, cols, fixed in ((axes[0], "lam_t_curve", ("at_r1", "vt_r1", "at_r5", "vt_r5"), f"λa={run.cfg.sweep.fixed_lam_a}"),
                                 (axes[1], "lam_a_curve", ("audio_acc", "av_r1", "av_r5"), f"λt={run.cfg.sweep.fixed_lam_t}")):
        lams = [float(p["lam"]) for p in seeds[0][key]]
        curves = {"lam": lams}
        for col in cols:
            curve = _curve(seeds, key, col)
            ax.errorbar(lams, [s["mean"] for s in curve.values()], yerr=[s["std"] or 0.0 for s in curve.values()],
                        marker="o", capsize=3, label=col, linestyle="-" if col.endswith(("r1", "acc")) else ":")
            curves[col] = curve
        out[key] = curves
        ax.set_xlabel("λt (text)" if key == "lam_t_curve" else "λa (audio)")
        ax.set_ylabel(f"% (mean ± std over {len(seeds)} seed(s))")
        ax.set_title(f"parallel c(E1, E2), {fixed}")
        ax.legend(fontsize=8)
    fig.tight_layout()
    run.save_figure(fig, "lambda_tradeoff")

    def sweep_table(key, name, columns):
        c, lam = out[key], key.removesuffix("_curve")
        df = pd.DataFrame([{lam: x, **{label: _fmt(c[col][point_key(x)], 2) for col, label in columns.items()},
                            "n (seeds)": len(seeds)} for x in c["lam"]])
        run.save_table(df, name)

    sweep_table("lam_t_curve", "lambda_t_sweep", {"at_r1": "AT R@1", "at_r5": "AT R@5", "vt_r1": "VT R@1", "vt_r5": "VT R@5"})
    sweep_table("lam_a_curve", "lambda_a_sweep", {"audio_acc": "audio acc", "av_r1": "AV R@1", "av_r5": "AV R@5"})
    t = out["lam_t_curve"]
    first, last = point_key(t["lam"][0]), point_key(t["lam"][-1])
    per_seed = {col: [[p[col] for p in s["lam_t_curve"]] for s in seeds] for col in ("at_r1", "vt_r1")}
    out["monotone"] = {
        "at_r1_frac_steps_up": sample([_frac_steps(v, up=True) for v in per_seed["at_r1"]], "seed"),
        "vt_r1_frac_steps_down": sample([_frac_steps(v, up=False) for v in per_seed["vt_r1"]], "seed"),
        "at_r1_rise": paired_gap(t["at_r1"][last], t["at_r1"][first]),
        "vt_r1_fall": paired_gap(t["vt_r1"][first], t["vt_r1"][last]),
    }
    return out


ARMS = ("U", "E1", "E2", "c_E1_mop_ATE", "parallel_ATE")


def fragile_point(index: int, run) -> dict:
    """One visibility of the sweep over `fragile.seeds`; at the default world's visibility the
    bonds_s<i> jobs already trained these arms for these seeds, so the summary reads them there."""
    f, cfg = run.cfg.fragile, run.cfg
    if index >= len(f.visibility):
        return {"skipped": True, "reason": f"profile {run.profile} sweeps {len(f.visibility)} visibilities"}
    if run.profile == "full":
        return {"skipped": True, "reason": "the full profile has no visibility knob"}
    vis = float(f.visibility[index])
    if vis == float(cfg.world.envelope_visibility):
        missing = [s for s in f.seeds if s not in cfg.seeds]
        if missing:
            raise ValueError(f"fragile.seeds {missing} are not in seeds {list(cfg.seeds)}: the default-visibility "
                             "point reuses the bonds_s<i> runs of the same seeds")
        return {"visibility": vis, "from_main_seeds": True}
    from .pipeline import run_fragile

    return {"visibility": vis, "from_main_seeds": False,
            "runs": [run_fragile(cfg, int(seed), vis, run.checkpoint_dir(f"seed{seed}")) for seed in f.seeds]}


def _fragile_runs(run, point: dict) -> list[dict]:
    """The per-seed rows of one sweep point, in `fragile.seeds` order (paired by seed across points)."""
    if not point["from_main_seeds"]:
        return point["runs"]
    by_seed = {s["seed"]: s for s in _seed_results(run)}
    return [{"visibility": point["visibility"], "seed": seed, "rows": by_seed[seed]["rows"]} for seed in run.cfg.fragile.seeds]


def fragile(run) -> dict:
    """Text→audio R@1 of each arm per visibility, as per-seed samples over `fragile.seeds`."""
    import matplotlib.pyplot as plt

    points = [read_json(run.out / "metrics" / f"fragile_p{i}.json") for i in range(N_FRAGILE_JOBS)]
    points = [p for p in points if not p.get("skipped")]
    by_vis = {}
    for point in points:
        rs = _fragile_runs(run, point)
        arms = {name: seed_sample([r["rows"][name]["at_r1"] for r in rs]) for name in ARMS}
        best = seed_sample([max(r["rows"]["E1"]["at_r1"], r["rows"]["E2"]["at_r1"]) for r in rs])
        by_vis[f"vis{round(100 * point['visibility'])}"] = {
            "visibility": point["visibility"], "from_main_seeds": point["from_main_seeds"], **arms, "best_expert": best,
            "gap_parallel_vs_best_expert": paired_gap(arms["parallel_ATE"], best),
            "gap_single_vs_E1": paired_gap(arms["c_E1_mop_ATE"], arms["E1"]),
        }
    vis = [v["visibility"] for v in by_vis.values()]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    ax = axes[0]
    for name, label in (("parallel_ATE", "U + c(E1,E2) AT-E"), ("c_E1_mop_ATE", "U + c(E1) AT-E"), ("E1", "expert E1"),
                        ("E2", "expert E2"), ("U", "U")):
        ax.errorbar(vis, [v[name]["mean"] for v in by_vis.values()], yerr=[v[name]["std"] or 0.0 for v in by_vis.values()],
                    marker="o", capsize=3, label=label, linestyle="--" if name in ("E1", "E2", "U") else "-")
    ax.set_xlabel("U-visibility of the audio-only attribute (P[envelope = colour])")
    ax.set_ylabel("text→audio R@1 (%), mean ± std (ddof 1)")
    ax.set_title("Fragile claim: bonded vs expert")
    ax.legend(fontsize=8)
    ax = axes[1]
    gaps = [v["gap_parallel_vs_best_expert"] for v in by_vis.values()]
    ivs = [_interval_cols(g) for g in gaps]
    means = [g["mean"] for g in gaps]
    lo = [m - (iv["90% lo"] if iv["90% lo"] is not None else m) for m, iv in zip(means, ivs)]
    hi = [(iv["90% hi"] if iv["90% hi"] is not None else m) - m for m, iv in zip(means, ivs)]
    ax.errorbar(vis, means, yerr=[lo, hi], marker="o", capsize=4, color="k")
    for g, x in zip(gaps, vis):
        ax.scatter([x] * len(g["values"]), g["values"], s=10, alpha=0.5)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("U-visibility of the audio-only attribute")
    ax.set_ylabel("parallel − best expert, R@1 (points)")
    ax.set_title(f"paired gap: mean, 90% interval, seeds (n={gaps[0]['n'] if gaps else 0})")
    fig.tight_layout()
    run.save_figure(fig, "fragile_claim")
    df = pd.DataFrame([{"visibility": v["visibility"], **{k: _fmt(v[k]) for k in ARMS},
                        "parallel − best expert": _fmt(v["gap_parallel_vs_best_expert"]),
                        "n (seeds)": v["parallel_ATE"]["n"]} for v in by_vis.values()])
    run.save_table(df, "fragile_claim")
    out = dict(by_vis)
    keys = list(by_vis)
    if len(keys) >= 2:  # does the gap grow from the least to the most visible point (paired by seed)?
        out["gap_rise"] = paired_gap(by_vis[keys[-1]]["gap_parallel_vs_best_expert"],
                                     by_vis[keys[0]]["gap_parallel_vs_best_expert"])
        # the whole sweep as knob samples (paired by seed across visibilities), for the knob claims
        order = sorted(keys, key=lambda k: by_vis[k]["visibility"])
        out["sweep"] = {name: knob("visibility", [by_vis[k]["visibility"] for k in order], [by_vis[k][name] for k in order])
                        for name in ("gap_parallel_vs_best_expert", "parallel_ATE", "best_expert")}
    return out


def _projector_params(d_in: int, d_out: int, hidden: int) -> int:
    return d_in * hidden + hidden + 2 * hidden + hidden * d_out + d_out + 2 * d_out


def cost(run) -> dict:
    seeds = _seed_results(run)
    s0 = seeds[0]
    if "params" not in s0:  # full profile: the released projectors' sizes (7 per bond direction)
        d, h = run.cfg.full.dims, run.cfg.full.proj_hidden
        params = {f"bond_{name}": 7 * _projector_params(d[a], d[b], h) for name, (a, b) in {
            "c_clap_g": ("clap_g", "imagebind"), "c_clap_m": ("clap_m", "imagebind"),
            "d_internvl": ("imagebind", "internvl")}.items()}
        run.save_table(pd.DataFrame([{"item": k, "trainable params": v} for k, v in params.items()]), "cost")
        return {"params": params}
    bonds = [k for k in s0["params"] if k.startswith("bond_")]
    rows = []
    for b in bonds:
        t = [s["timing"][f"{b}_s"] for s in seeds]
        rows.append({"item": b.replace("bond_", "bond "), "trainable params": s0["params"][b],
                     "train time (s)": float(np.mean(t))})
    u_time = [s["timing"]["spaces_s"] for s in seeds]
    rows.append({"item": "all four spaces (U, E1, E2, VT) from scratch", "trainable params": None,
                 "train time (s)": float(np.mean(u_time))})
    rows.append({"item": "retraining the unified space U (image-text, then audio)",
                 "trainable params": s0["params"]["U_encoders"],
                 "train time (s)": float(np.mean([s["timing"]["U_s"] for s in seeds]))})
    run.save_table(pd.DataFrame(rows), "cost", floatfmt=".1f")
    parallel = s0["params"]["bond_c_E1"] + s0["params"]["bond_c_E2"]
    return {"params": s0["params"],
            "parallel_bond_params": parallel,
            "parallel_bond_vs_U_params": parallel / s0["params"]["U_encoders"]}


EXPERIMENTS = {**{f"bonds_s{i}": partial(bonds_seed, i) for i in range(N_SEED_JOBS)},
               **{f"fragile_p{i}": partial(fragile_point, i) for i in range(N_FRAGILE_JOBS)},
               "main_table": main_table, "lambda_tradeoff": lambda_tradeoff, "fragile": fragile, "cost": cost}
