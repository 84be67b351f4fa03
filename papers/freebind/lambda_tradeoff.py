"""The customised-inference curves: λt trades audio-text against image-text retrieval, λa moves audio
accuracy and audio-image retrieval (parallel bond); each point a per-seed sample."""
from __future__ import annotations

import numpy as np
import pandas as pd

from shared.samples import gap as paired_gap, sample

from .evaluation import seed_sample
from .summaries import fmt, seed_results


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

    seeds = seed_results(run)
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
        df = pd.DataFrame([{lam: x, **{label: fmt(c[col][point_key(x)], 2) for col, label in columns.items()},
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
