"""FreeBind experiments: `fn(run) -> metrics` (see shared.experiment).

bonds_s0..s2  one seed each: train the spaces and the 6 bond MoPs, score every table row and the λ
              curves (run side by side by Snakemake; the bonds are cached under checkpoints/)
main_table    paper Tables 3-4 analogue, mean ± std over seeds, and the claims' gaps
lambda_tradeoff  the customised-inference curves (λt: AT vs VT; λa: audio accuracy vs AV)
fragile       bonded vs expert text→audio R@1 across the U-visibility knob
cost          trainable parameters and training time of the bonds vs retraining the unified space
"""
from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd

from shared.io import read_json

from .evaluation import COLUMNS, summarise

N_SEED_JOBS = 3
ROW_LABELS = {
    "U": "U (unified, 'ImageBind')",
    "E1": "E1 (audio-text expert, 'CLAP_g')",
    "E2": "E2 (audio-text expert, 'CLAP_m')",
    "VT": "VT (image-text expert, 'InternVL-C')",
    "c_E1_single_ATE": "U + c(E1), single projector, AT-E",
    "c_E1_mop_ATE": "U + c(E1), MoP, AT-E",
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
    out = []
    for i in range(N_SEED_JOBS):
        data = read_json(run.out / "metrics" / f"bonds_s{i}.json")
        if not data.get("skipped"):
            out.append(data)
    if not out:
        raise RuntimeError("no bonds_s<i> metrics found: run the bonds_s0 experiment first")
    return out


def _fmt(s: dict | None) -> str:
    return "–" if s is None else f"{s['mean']:.1f} ± {s['std']:.1f}"


def main_table(run) -> dict:
    seeds = _seed_results(run)
    rows = [r for r in ROW_LABELS if r in seeds[0]["rows"]]
    cols = list(COLUMNS) if run.profile != "full" else sorted({c for r in rows for c in seeds[0]["rows"][r]} - set(COLUMNS))
    table = {row: {c: summarise([s["rows"][row].get(c) for s in seeds]) for c in cols} for row in rows}
    df = pd.DataFrame([{"space / bond": ROW_LABELS[r], **{c: _fmt(table[r][c]) for c in cols}} for r in rows])
    run.save_table(df, "main_table")

    def gap(a_row, a_col, b_row, b_col=None):
        vals = []
        for s in seeds:
            a, b = s["rows"].get(a_row, {}).get(a_col), s["rows"].get(b_row, {}).get(b_col or a_col)
            vals.append(None if a is None or b is None else a - b)
        return summarise(vals)

    gaps = {
        "c_mop_vs_E1_audio_acc": gap("c_E1_mop_ATE", "audio_acc", "E1"),
        "parallel_vs_E1_audio_acc": gap("parallel_ATE", "audio_acc", "E1"),
        "parallel_vs_single_expert_audio_acc": gap("parallel_ATE", "audio_acc", "c_E1_mop_ATE"),
        "parallel_vs_single_expert_at_r1": gap("parallel_ATE", "at_r1", "c_E1_mop_ATE"),
        "mop_vs_single_audio_acc": gap("c_E1_mop_ATE", "audio_acc", "c_E1_single_ATE"),
        "mop_vs_single_at_r1": gap("c_E1_mop_ATE", "at_r1", "c_E1_single_ATE"),
        "disp_dense_vs_VT_vt_r1": gap("d_VT_dense", "vt_r1", "VT"),
        "disp_dense_vs_U_audio_acc": gap("d_VT_dense", "audio_acc", "U"),
        "disp_nodense_vs_U_audio_acc": gap("d_VT_nodense", "audio_acc", "U"),
        "parallel_vs_E1_at_r1": gap("parallel_ATE", "at_r1", "E1"),
        "sequential_vs_VT_vt_r1": gap("sequential_ATE", "vt_r1", "VT"),
        "sequential_vs_E1_audio_acc": gap("sequential_ATE", "audio_acc", "E1"),
    }
    pd_g = pd.DataFrame([{"comparison": k, "mean": None if v is None else v["mean"],
                          "std": None if v is None else v["std"]} for k, v in gaps.items()])
    run.save_table(pd_g, "main_table_gaps")
    return {"seeds": [s["seed"] for s in seeds], "table": table, "gaps": gaps}


def _curve(seeds, key, col):
    lams = [p["lam"] for p in seeds[0][key]]
    vals = np.array([[p[col] for p in s[key]] for s in seeds])
    return lams, vals.mean(0), vals.std(0)


def _frac_steps(values, up: bool) -> float:
    """Fraction of sweep steps that move the claimed way (ties count; seed means are compared after
    rounding to 1e-9, so equal hit counts averaged in another order are ties, not float-noise steps)."""
    d = np.diff(np.round(np.asarray(values, dtype=float), 9))
    return float(np.mean(d >= 0 if up else d <= 0))


def lambda_tradeoff(run) -> dict:
    import matplotlib.pyplot as plt

    seeds = _seed_results(run)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    out = {}
    for ax, key, cols, fixed in ((axes[0], "lam_t_curve", ("at_r1", "vt_r1", "at_r5", "vt_r5"), f"λa={run.cfg.sweep.fixed_lam_a}"),
                                 (axes[1], "lam_a_curve", ("audio_acc", "av_r1", "av_r5"), f"λt={run.cfg.sweep.fixed_lam_t}")):
        rows = {}
        for col in cols:
            lams, m, s = _curve(seeds, key, col)
            ax.errorbar(lams, m, yerr=s, marker="o", capsize=3, label=col, linestyle="-" if col.endswith(("r1", "acc")) else ":")
            rows[col] = [float(v) for v in m]
        rows["lam"] = [float(v) for v in lams]
        out[key] = rows
        ax.set_xlabel("λt (text)" if key == "lam_t_curve" else "λa (audio)")
        ax.set_ylabel("% (mean ± std over seeds)")
        ax.set_title(f"parallel c(E1, E2), {fixed}")
        ax.legend(fontsize=8)
    fig.tight_layout()
    run.save_figure(fig, "lambda_tradeoff")
    t = out["lam_t_curve"]
    df = pd.DataFrame({"lam_t": t["lam"], "AT R@1": t["at_r1"], "AT R@5": t["at_r5"], "VT R@1": t["vt_r1"], "VT R@5": t["vt_r5"]})
    run.save_table(df, "lambda_t_sweep")
    a = out["lam_a_curve"]
    run.save_table(pd.DataFrame({"lam_a": a["lam"], "audio acc": a["audio_acc"], "AV R@1": a["av_r1"], "AV R@5": a["av_r5"]}),
                   "lambda_a_sweep")
    out["monotone"] = {"at_r1_frac_steps_up": _frac_steps(t["at_r1"], up=True),
                       "vt_r1_frac_steps_down": _frac_steps(t["vt_r1"], up=False),
                       "at_r1_rise": t["at_r1"][-1] - t["at_r1"][0], "vt_r1_fall": t["vt_r1"][0] - t["vt_r1"][-1]}
    return out


def fragile(run) -> dict:
    import matplotlib.pyplot as plt

    from .pipeline import run_fragile

    f = run.cfg.fragile
    res = []
    for vis in f.visibility:
        for seed in f.seeds:
            res.append(run_fragile(run.cfg, int(seed), float(vis), run.checkpoint_dir(f"vis{vis}", f"seed{seed}")))
    by_vis = {}
    for vis in f.visibility:
        rs = [r for r in res if r["visibility"] == vis]
        by_vis[f"vis{round(100 * float(vis))}"] = {
            "visibility": float(vis),
            **{name: summarise([r["rows"][name]["at_r1"] for r in rs]) for name in ("U", "E1", "E2", "c_E1_mop_ATE", "parallel_ATE")},
            "gap_parallel_vs_best_expert": summarise([r["gap_parallel_vs_best_expert"] for r in rs]),
            "gap_single_vs_E1": summarise([r["gap_single_vs_E1"] for r in rs]),
        }
    vis = [v["visibility"] for v in by_vis.values()]
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for name, label in (("parallel_ATE", "U + c(E1,E2) AT-E"), ("c_E1_mop_ATE", "U + c(E1) AT-E"), ("E1", "expert E1"),
                        ("E2", "expert E2"), ("U", "U")):
        ax.errorbar(vis, [v[name]["mean"] for v in by_vis.values()], yerr=[v[name]["std"] for v in by_vis.values()],
                    marker="o", capsize=3, label=label, linestyle="--" if name in ("E1", "E2", "U") else "-")
    ax.set_xlabel("U-visibility of the audio-only attribute (P[envelope = colour])")
    ax.set_ylabel("text→audio R@1 (%)")
    ax.set_title("Fragile claim: bonded vs expert")
    ax.legend(fontsize=8)
    fig.tight_layout()
    run.save_figure(fig, "fragile_claim")
    df = pd.DataFrame([{"visibility": v["visibility"], **{k: _fmt(v[k]) for k in ("U", "E1", "E2", "c_E1_mop_ATE", "parallel_ATE")},
                        "parallel − best expert": _fmt(v["gap_parallel_vs_best_expert"])} for v in by_vis.values()])
    run.save_table(df, "fragile_claim")
    return by_vis


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
               "main_table": main_table, "lambda_tradeoff": lambda_tradeoff, "fragile": fragile, "cost": cost}
