"""Paper Tables 3-4 analogue: every cell a per-seed sample (shared.samples), the references a bond must
beat (late fusion and the experts' average, no training, papers/freebind/fusion.py; the bond trained on
shuffled pseudo tuples), each bond and late fusion again at the λ best on validation events
(lambda_selection.py, with the λ chosen and the evaluations spent), and the paired (seed-wise) gaps the
claims decide on."""
from __future__ import annotations

import pandas as pd

from shared.samples import gap as paired_gap

from .evaluation import COLUMNS, seed_sample
from .summaries import fmt, interval_cols, seed_results

ROW_LABELS = {
    "U": "U (unified, 'ImageBind')",
    "E1": "E1 (audio-text expert, 'CLAP_g')",
    "E2": "E2 (audio-text expert, 'CLAP_m')",
    "VT": "VT (image-text expert, 'InternVL-C')",
    "c_E1_single_ATE": "U + c(E1), single projector, AT-E",
    "c_E1_mop_ATE": "U + c(E1), MoP, AT-E",
    "parallel_shuffled_ATE": "U + c(E1, E2) trained on shuffled pairs, AT-E",
    "parallel_shuffled_versatile": "U + c(E1, E2) trained on shuffled pairs, Versatile",
    "parallel_ATE": "U + c(E1, E2) parallel, AT-E",
    "parallel_versatile": "U + c(E1, E2) parallel, Versatile",
    "d_VT_dense": "U + d(VT), dense terms",
    "d_VT_nodense": "U + d(VT), no dense terms",
    "sequential_ATE": "U + d(VT) + c(E1, E2) sequential, AT-E",
    "sequential_versatile": "U + d(VT) + c(E1, E2) sequential, Versatile",
    "late_fusion_ATE": "reference: late fusion U + E1 + E2, AT-E weights, no training",
    "late_fusion_versatile": "reference: late fusion U + E1 + E2, Versatile weights, no training",
    "late_fusion_E1_ATE": "reference: late fusion U + E1, AT-E weights, no training",
    "experts_avg": "reference: the experts' average E1 + E2 (no U), no training",
    "late_fusion_VT": "reference: late fusion U + VT, displacement weights, no training",
    "parallel_val": "U + c(E1, E2) parallel, λa, λt best on validation (per column)",
    "late_fusion_val": "reference: late fusion U + E1 + E2, λa, λt best on validation (per column)",
    "d_VT_val": "U + d(VT), λv, λt best on validation (per column)",
    "late_fusion_VT_val": "reference: late fusion U + VT, λv, λt best on validation (per column)",
}
# the arms tuned on validation, and the λ each chooses
TUNED = {"parallel_val": "(λa, λt)", "late_fusion_val": "(λa, λt)", "d_VT_val": "(λv, λt)", "late_fusion_VT_val": "(λv, λt)"}
# the paper's headline tasks (one column per task: R@1 for retrieval, accuracy for classification)
TASKS = ("at_r1", "av_r1", "vt_r1", "audio_acc", "image_acc")


def main_table(run) -> dict:
    """Every cell is a per-seed sample; a gap is the seed-wise (paired) difference of two cells."""
    seeds = seed_results(run)
    rows = [r for r in ROW_LABELS if r in seeds[0]["rows"]]

    def cell(row, col):
        return seed_sample([s["rows"].get(row, {}).get(col) for s in seeds])

    shown = list(COLUMNS) if run.profile != "full" else sorted({c for r in rows for c in seeds[0]["rows"][r]} - set(COLUMNS))
    cols = shown if run.profile != "full" else shown + list(COLUMNS)  # the claims read the aliases at full
    table = {row: {c: cell(row, c) for c in cols} for row in rows}
    df = pd.DataFrame([{"space / bond": ROW_LABELS[r], **{c: fmt(table[r][c]) for c in shown}, "n (seeds)": len(seeds)}
                       for r in rows])
    run.save_table(df, "main_table")

    def gap(a_row, a_col, b_row, b_col=None):
        if a_row not in rows or b_row not in rows:
            return None
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
        # the bond against fusion without training (what binding adds inside the experts' spaces)
        "parallel_vs_late_fusion_audio_acc": gap("parallel_ATE", "audio_acc", "late_fusion_ATE"),
        "parallel_vs_late_fusion_at_r1": gap("parallel_ATE", "at_r1", "late_fusion_ATE"),
        "parallel_vs_experts_avg_audio_acc": gap("parallel_ATE", "audio_acc", "experts_avg"),
        "parallel_vs_experts_avg_at_r1": gap("parallel_ATE", "at_r1", "experts_avg"),
        "c_mop_vs_late_fusion_E1_audio_acc": gap("c_E1_mop_ATE", "audio_acc", "late_fusion_E1_ATE"),
        # every task, the bond against late fusion at the bond's own λ (Versatile) and at the λ best on
        # validation for each (the same grid, so the same number of validation evaluations)
        **{f"versatile_vs_late_fusion_{c}": gap("parallel_versatile", c, "late_fusion_versatile") for c in TASKS},
        **{f"tuned_vs_late_fusion_tuned_{c}": gap("parallel_val", c, "late_fusion_val") for c in TASKS},
        # shuffled pairs keep the expert's own alignment inside its space; across spaces they are the floor
        "shuffled_vs_U_audio_acc": gap("parallel_shuffled_ATE", "audio_acc", "U"),
        "shuffled_vs_U_at_r1": gap("parallel_shuffled_ATE", "at_r1", "U"),
        "shuffled_vs_U_av_r1": gap("parallel_shuffled_versatile", "av_r1", "U"),
        "versatile_vs_shuffled_av_r1": gap("parallel_versatile", "av_r1", "parallel_shuffled_versatile"),
        # the "free lunch": Versatile against U (ImageBind) on every task
        **{f"versatile_vs_U_{c}": gap("parallel_versatile", c, "U") for c in TASKS},
        "disp_dense_vs_U_vt_r5": gap("d_VT_dense", "vt_r5", "U"),
        "disp_dense_vs_U_image_acc": gap("d_VT_dense", "image_acc", "U"),
        "disp_dense_vs_VT_vt_r5": gap("d_VT_dense", "vt_r5", "VT"),
        "disp_dense_vs_VT_image_acc": gap("d_VT_dense", "image_acc", "VT"),
        **{f"disp_dense_vs_late_fusion_VT_{c}": gap("d_VT_dense", c, "late_fusion_VT")
           for c in ("vt_r5", "image_acc", "audio_acc")},
        **{f"disp_tuned_vs_late_fusion_VT_tuned_{c}": gap("d_VT_val", c, "late_fusion_VT_val")
           for c in ("vt_r5", "image_acc", "audio_acc")},
        "disp_dense_vs_U_audio_acc": gap("d_VT_dense", "audio_acc", "U"),
        "disp_nodense_vs_dense_audio_acc": gap("d_VT_nodense", "audio_acc", "d_VT_dense"),
        "sequential_vs_parallel_vt_r5": gap("sequential_ATE", "vt_r5", "parallel_ATE"),
        "sequential_vs_disp_audio_acc": gap("sequential_ATE", "audio_acc", "d_VT_dense"),
    }
    pd_g = pd.DataFrame([{"comparison (seed-wise a − b)": k, "mean": None if v is None else v["mean"],
                          "std (ddof 1)": None if v is None else v["std"], **interval_cols(v),
                          "n (seeds)": None if v is None else v["n"]} for k, v in gaps.items()])
    run.save_table(pd_g, "main_table_gaps", floatfmt=".2f")
    return {"seeds": [s["seed"] for s in seeds], "table": table, "best_expert": best_expert, "gaps": gaps,
            "lambda_selection": lambda_selection(run, seeds)}


def lambda_selection(run, seeds: list[dict]) -> dict:
    """The λ each tuned arm chose per column on validation, per seed, and the evaluations it spent."""
    tuned = [s["tuning"] for s in seeds if "tuning" in s]
    if not tuned:   # the full profile scores the released projectors at the paper's λ: nothing is tuned
        run.save_table(pd.DataFrame([{"arm (λ best on validation)": "none: no λ is tuned on validation here"}]),
                       "lambda_selection")
        return {}
    out = {arm: {"evaluations": [t[arm]["evaluations"] for t in tuned],
                 "chosen": {c: [t[arm]["chosen"].get(c) for t in tuned] for c in TASKS}}
           for arm in TUNED if arm in tuned[0]}
    df = pd.DataFrame([{"arm (λ best on validation)": ROW_LABELS[arm], "λ": TUNED[arm],
                        "validation evaluations per seed": ", ".join(sorted({str(e) for e in v["evaluations"]})),
                        **{c: "; ".join("(" + ", ".join(f"{x:g}" for x in lam) + ")" if lam else "–"
                                        for lam in v["chosen"][c]) for c in TASKS}}
                       for arm, v in out.items()])
    run.save_table(df, "lambda_selection")
    return out
