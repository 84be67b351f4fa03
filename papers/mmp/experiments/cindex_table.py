"""`cindex`: tables/cindex (every arm, the floor, the ceilings) and tables/token_spread."""
from __future__ import annotations

import pandas as pd

from .arms import arm_label, fmt, paired_gap
from .oracle_ceilings import CEILINGS


def check_same_folds(parts: dict) -> None:
    """Every arm must have run the first n_folds of one fold order (same test sites), so that fold
    i of one arm's sample pairs with fold i of another's."""
    longest = max(parts.values(), key=lambda p: p["n_folds"])["test_sites"]
    for arm, part in parts.items():
        if part["test_sites"] != longest[:part["n_folds"]]:
            raise ValueError(f"cindex_{arm}.json tested on sites {part['test_sites']}, not the first "
                             f"{part['n_folds']} folds {longest[:part['n_folds']]} of the other arms: rerun "
                             f"the mmp_cindex_* rules with one config and seed")


def cindex_table(run) -> dict:
    """The c-index table (mean ± std over folds, n folds, 90% interval of the mean) of every arm,
    with the mean-predictor floor, the oracle ceilings and the true log-hazard beside them; reads
    metrics/cindex_<arm>.json and metrics/oracle_ceilings.json, written by their own rules. Each
    c-index is a fold sample; all arms share the fold order, so samples pair fold by fold."""
    from shared.intervals import mean_interval
    from shared.io import read_json

    cfg = run.cfg
    parts = {arm: read_json(run.out / "metrics" / f"cindex_{arm}.json") for arm in cfg.eval.arms}
    check_same_folds(parts)
    full = max(parts.values(), key=lambda p: p["n_folds"])
    ceilings_path = run.out / "metrics" / "oracle_ceilings.json"
    ceilings = read_json(ceilings_path) if ceilings_path.is_file() else {}
    if ceilings.get("skipped"):   # full profile: no synthetic truth, no ceiling rows
        ceilings = {}
    if ceilings:
        check_same_folds({**parts, "oracle_ceilings": ceilings})

    def row(name, s, folds):
        lo, hi = mean_interval(s["values"])[:2] if s["n"] >= 2 else (float("nan"), float("nan"))
        return {"model": name, "c-index": fmt(s), "90% interval of the mean": f"[{lo:.3f}, {hi:.3f}]",
                "mean": s["mean"], "std": s["std"], "folds": folds}

    metrics, rows = {}, []
    metrics["mean_predictor"] = full["mean_predictor"]
    rows.append(row("Mean predictor (floor: one constant risk)", full["mean_predictor"], full["n_folds"]))
    for arm, part in parts.items():
        metrics[arm] = part["cindex"]
        rows.append(row(arm_label(arm, cfg), part["cindex"], part["n_folds"]))
    for key, label in CEILINGS.items():
        if key in ceilings.get("ceilings", {}):
            metrics[f"ceiling_{key}"] = ceilings["ceilings"][key]
            rows.append(row(label, ceilings["ceilings"][key], ceilings["n_folds"]))
    if "oracle" in full:
        metrics["oracle"] = full["oracle"]
        rows.append(row("Oracle (true log-hazard)", full["oracle"], full["n_folds"]))
    n = len(metrics.get("mmp_trans", {}).get("values", []))
    for arm in ("abmil", "pathway", "mmp_histo", "mmp_gene", "mmp_ot", "mmp_trans_std_pi", "full_transformer",
                "token_linear", "token_mlp"):
        if arm in parts and "mmp_trans" in parts and parts[arm]["n_folds"] == n:   # paired per-fold gaps
            metrics[f"trans_minus_{arm}"] = paired_gap(metrics["mmp_trans"], metrics[arm])
    run.save_table(pd.DataFrame(rows), "cindex")
    spread = [{"arm": arm_label(arm, cfg), "π std (input)": part["token_spread"]["pi_input_std"],
               "π part, projected": part["token_spread"]["pi_projected"],
               "μ, Σ part, projected": part["token_spread"]["mu_sigma_projected"],
               "ratio μΣ / π": part["token_spread"]["ratio"]} for arm, part in parts.items() if "token_spread" in part]
    run.save_table(pd.DataFrame(spread, columns=["arm", "π std (input)", "π part, projected", "μ, Σ part, projected",
                                                 "ratio μΣ / π"]), "token_spread", floatfmt=".4g")
    return metrics
