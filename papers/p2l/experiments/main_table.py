"""main_table: the task × method table, runtime/NFE, the artifact table, the prompt-trajectory figures."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from shared.io import read_json
from shared.samples import gap, sample

from .problems import TASK_NAMES, cell


def _metrics_parts(out: Path, names) -> dict:
    return {n: read_json(Path(out) / "metrics" / f"main_{n}.json") for n in names}


def tuning_evaluations(out: Path, task: str) -> dict[str, list[int]]:
    """Validation solves per method and prior (the draw's points and each extension's, times the validation
    images), from `tables/tuning_<task>.csv`: the extension rounds make them differ between priors."""
    path = Path(out) / "tables" / f"tuning_{task}.csv"
    if not path.is_file():
        return {}
    df = pd.read_csv(path)
    if "prior" not in df:
        df["prior"] = 0
    return {m: [int(g["n_val"].sum()) for _, g in d.groupby("prior")] for m, d in df.groupby("method", sort=False)}


def main_table(run) -> dict:
    cfg = run.cfg
    parts = _metrics_parts(run.out, cfg.main_tasks)
    methods = list(dict.fromkeys(m for res in parts.values() for m in res["methods"]))   # a method may skip tasks
    rows, wide_rows, runtime_rows, hf_rows = [], [], [], []
    for task, res in parts.items():
        evaluations = tuning_evaluations(run.out, task)
        for m in (m for m in methods if m in res["methods"]):
            r = res["methods"][m]
            row = {"task": TASK_NAMES.get(task, task), "method": m, "n": r["ssim"]["n"],
                   "noise draws": res.get("noise_seeds", 1)}
            for k in ("psnr", "ssim", "lpips", "fid", "attr_acc", "fd"):
                if k in r:
                    row[k] = cell(r[k])
                    if k != "attr_acc":
                        wide_rows.append({"task": row["task"], "method": m, "metric": k, "mean": r[k]["mean"]})
            if "fd_bootstrap_ci" in r:
                row["fd_ci"] = "[{:.3f}, {:.3f}]".format(*r["fd_bootstrap_ci"])
            row["rho"] = r["rho"]
            # every tuned value, "(edge)" where it lies at an edge of the grid tried
            by_prior = list(zip(r.get("tuned_by_prior", [r.get("tuned", {})]),
                                r.get("tuned_at_edge_by_prior", [r.get("tuned_at_edge", {})])))
            row["tuned"] = "; ".join((f"prior {i}: " if len(by_prior) > 1 else "") + ", ".join(
                f"{k} = {v:g}" + (" (edge)" if edge.get(k) else "") for k, v in t.items())
                for i, (t, edge) in enumerate(by_prior))
            row["evaluations"] = (" / ".join(map(str, evaluations[m])) if m in evaluations   # per prior
                                  else r.get("tuning_evaluations"))
            rows.append(row)
            runtime_rows.append({"task": task, "method": m, "nfe_per_image": r["nfe"],
                                 "decoder_calls": r["decoder_calls"], "encoder_calls": r["encoder_calls"],
                                 "wall_s": r["wall_s"]["mean"],
                                 "runtime_ratio_to_ldps": r["runtime_ratio_to_ldps"]["mean"],
                                 "nfe_ratio_to_ldps": r["nfe_ratio_to_ldps"]})
            hf_rows.append({"task": task, "method": m, "n": r["hf_energy"]["n"], "hf_energy": cell(r["hf_energy"]),
                            "gt_hf_energy": res["gt_hf_energy"],
                            "hf_error": cell(r["hf_error"]) if "hf_error" in r else None,
                            "final_off_range": cell(r["final_off_range"]) if "final_off_range" in r else None})
    run.save_table(pd.DataFrame(rows), "main_table")
    wide = pd.DataFrame(wide_rows).pivot_table(index="task", columns=["metric", "method"], values="mean", sort=False)
    wide.columns = [f"{m} {k}" for k, m in wide.columns]
    run.save_table(wide.reset_index(), "main_table_wide")
    run.save_table(pd.DataFrame(runtime_rows), "runtime_nfe")
    run.save_table(pd.DataFrame(hf_rows), "artifacts_range")

    result = {}
    p2l = [parts[t]["methods"]["p2l"] for t in parts]
    if "prompt_cos" in p2l[0]:
        # per image, averaged over the tasks (the same test images in the same order in every task)
        result["prompt"] = {k: sample(np.mean([r[k]["values"] for r in p2l], 0), "image", groups=p2l[0][k].get("groups"),
                                      group_unit=p2l[0][k].get("group_unit"))
                            for k in ("prompt_cos", "null_cos")}
        result["prompt"]["gain"] = gap(result["prompt"]["prompt_cos"], result["prompt"]["null_cos"])
    psld = [parts[t]["methods"]["psld"] for t in parts]
    result["runtime"] = {
        "p2l_over_psld": sample([np.mean([a["wall_s"]["mean"] / b["wall_s"]["mean"] for a, b in zip(p2l, psld)])],
                                "seed"),
        "nfe_p2l_over_psld": float(np.mean([a["nfe"] / b["nfe"] for a, b in zip(p2l, psld)])),
        "decoder_p2l_over_psld": float(np.mean([a["decoder_calls"] / b["decoder_calls"] for a, b in zip(p2l, psld)])),
        "encoder_p2l_over_psld": float(np.mean([a["encoder_calls"] / b["encoder_calls"] for a, b in zip(p2l, psld)])),
        # per prompt step: (ratio − 1) / K, with K the prompt steps P2L's tuning chose (prior 0, whose solves
        # the counts are); 1 where each prompt step adds one UNet and one decoder evaluation to PSLD's step
        "nfe_over_psld_per_prompt_step": float(np.mean([(a["nfe"] / b["nfe"] - 1) / _k(a) for a, b in zip(p2l, psld)])),
        "decoder_over_psld_per_prompt_step": float(np.mean([(a["decoder_calls"] / b["decoder_calls"] - 1) / _k(a)
                                                            for a, b in zip(p2l, psld)])),
        # call counts follow from the configured algorithms (K, steps): accounting, not a measurement
        "from_config": ["nfe_p2l_over_psld", "decoder_p2l_over_psld", "encoder_p2l_over_psld",
                        "nfe_over_psld_per_prompt_step", "decoder_over_psld_per_prompt_step"],
        "calls_per_image": {m: {k: next(p for p in parts.values() if m in p["methods"])["methods"][m][c] for k, c in
                                (("nfe", "nfe"), ("decoder", "decoder_calls"), ("encoder", "encoder_calls"))}
                            for m in methods},
        "ratio_to_ldps": {m: sample([np.mean([parts[t]["methods"][m]["runtime_ratio_to_ldps"]["mean"]
                                              for t in parts if m in parts[t]["methods"]])], "seed") for m in methods}}
    run.save_figure(trajectory_figure(parts), "prompt_trajectory")
    run.save_figure(off_range_figure(parts), "off_range")
    return result


def _k(method: dict) -> int:
    """The prompt steps per sampling step P2L ran at (tuned, else its configured K = 1)."""
    return int((method.get("tuned") or {}).get("prompt_steps", 1))


def trajectory_figure(parts):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 3))
    for i, (task, res) in enumerate(parts.items()):
        tr = res["methods"]["p2l"]["trajectory"]
        if not tr["prompt_cos"]:
            continue
        ax.plot(tr["step"], tr["prompt_cos"], color=f"C{i}", label=f"tuned C* ({TASK_NAMES.get(task, task)})")
        ax.plot(tr["step"], tr["null_cos"], color=f"C{i}", ls=":", lw=1)
    ax.set_xlabel("sampling step")
    ax.set_ylabel("cos(C, C_true)")
    ax.set_title("Prompt trajectory (dotted: null prompt C_∅)", fontsize=9)
    ax.legend(fontsize=6)
    fig.tight_layout()
    return fig


def off_range_figure(parts):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(parts), figsize=(2.6 * len(parts), 2.6), squeeze=False)
    for ax, (task, res) in zip(axes[0], parts.items()):
        for m in ("ldps", "psld", "p2l"):
            tr = res["methods"][m]["trajectory"]
            if tr["off_range"]:
                ax.plot(tr["step"], tr["off_range"], label=m)
        ax.set_title(TASK_NAMES.get(task, task), fontsize=8)
        ax.set_xlabel("step")
    axes[0, 0].set_ylabel("‖ẑ₀ − E(D(ẑ₀))‖ / ‖ẑ₀‖")
    axes[0, 0].legend(fontsize=6)
    fig.tight_layout()
    return fig
