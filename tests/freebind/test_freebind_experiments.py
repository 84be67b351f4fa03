"""FreeBind's summary experiments on hand-made seed results: per-seed samples, paired gaps, claims keys."""
from pathlib import Path

import numpy as np
import pytest

from papers.freebind.evaluation import COLUMNS, seed_sample
from papers.freebind.experiments import ROW_LABELS, lambda_tradeoff, main_table, point_key
from shared.claims import evaluate_claim, load_claims, lookup
from shared.config import load_config
from shared.experiment import Run
from shared.io import write_json

PAPER = Path(__file__).resolve().parents[2] / "papers" / "freebind"
SUPPORTED = {"E1": ("at_r1", "at_r5", "audio_acc"), "E2": ("at_r1", "at_r5", "audio_acc"),
             "VT": ("vt_r1", "vt_r5", "image_acc")}


def _seed_result(seed: int, lam_t, lam_a) -> dict:
    """A bonds_s<i> result whose every number is a known function of (seed, row, column, λ)."""
    def value(row_i, col_i):
        return 10.0 * row_i + col_i + 0.5 * seed

    rows = {row: {c: (value(i, j) if c in SUPPORTED.get(row, COLUMNS) else None) for j, c in enumerate(COLUMNS)}
            for i, row in enumerate(ROW_LABELS)}
    # AT R@1 rises with λt on every seed; VT R@1 is flat from λt = 0 to .25, as equal hit counts
    # computed in another order (1e-15 apart), then falls
    lam_t_curve = [{"lam": lt, **{c: 0.0 for c in COLUMNS}, "at_r1": 2.0 + 4 * lt + seed, "at_r5": 10 + 10 * lt,
                    "vt_r1": (9.0 + seed + (1e-15 if k == 1 else 0.0)) if lt <= 0.25 else 9.0 + seed - 4 * lt,
                    "vt_r5": 30 - 10 * lt} for k, lt in enumerate(lam_t)]
    lam_a_curve = [{"lam": la, **{c: 0.0 for c in COLUMNS}, "audio_acc": 50 + 30 * la + seed} for la in lam_a]
    return {"seed": seed, "rows": rows, "lam_t_curve": lam_t_curve, "lam_a_curve": lam_a_curve}


@pytest.fixture
def three_seeds(tmp_path):
    cfg = load_config(PAPER / "config.yaml", "smoke")
    for i in range(3):
        write_json(tmp_path / "metrics" / f"bonds_s{i}.json", _seed_result(i, cfg.sweep.lam_t, cfg.sweep.lam_a))
    return cfg, tmp_path


def test_seed_sample_keeps_seed_order_and_ddof1():
    s = seed_sample([1.0, 2.0, 4.0])
    assert s["unit"] == "seed" and s["values"] == [1.0, 2.0, 4.0] and s["n"] == 3
    assert s["std"] == pytest.approx(np.std([1.0, 2.0, 4.0], ddof=1))
    assert seed_sample([None, None]) is None
    assert np.isnan(seed_sample([1.0, None])["values"][1])


def test_main_table_cells_are_seed_samples_and_gaps_pair_by_seed(three_seeds):
    cfg, out = three_seeds
    m = main_table(Run("freebind", "main_table", cfg, out))
    cell = m["table"]["parallel_ATE"]["audio_acc"]
    i, j = list(ROW_LABELS).index("parallel_ATE"), COLUMNS.index("audio_acc")
    assert cell["unit"] == "seed" and cell["values"] == [10.0 * i + j + 0.5 * s for s in range(3)]
    assert m["table"]["E1"]["vt_r1"] is None  # a column the expert lacks
    gap = m["gaps"]["parallel_vs_E1_audio_acc"]
    assert gap["values"] == [a - b for a, b in zip(cell["values"], m["table"]["E1"]["audio_acc"]["values"])]
    assert gap["n"] == 3 and gap["std"] == 0.0  # the seed offset cancels in a paired difference
    md = (out / "tables" / "main_table.md").read_text()
    assert "±" in md and "n (seeds)" in md


def test_lambda_tradeoff_points_are_seed_samples(three_seeds):
    cfg, out = three_seeds
    m = lambda_tradeoff(Run("freebind", "lambda_tradeoff", cfg, out))
    at = m["lam_t_curve"]["at_r1"]
    assert list(at) == [point_key(x) for x in cfg.sweep.lam_t] and point_key(0.25) == "lam25"
    assert at["lam100"]["values"] == [6.0, 7.0, 8.0]
    mono = m["monotone"]
    assert mono["at_r1_frac_steps_up"]["values"] == [1.0, 1.0, 1.0]
    # the 1e-15 step between equal hit counts is a tie after rounding, so every VT step is monotone
    assert mono["vt_r1_frac_steps_down"]["values"] == [1.0, 1.0, 1.0]
    assert mono["at_r1_rise"]["values"] == pytest.approx([4.0] * 3)
    assert "±" in (out / "tables" / "lambda_t_sweep.md").read_text()


def test_claims_resolve_to_paired_seed_evidence(three_seeds):
    cfg, out = three_seeds
    metrics = {"main_table": main_table(Run("freebind", "main_table", cfg, out)),
               "lambda_tradeoff": lambda_tradeoff(Run("freebind", "lambda_tradeoff", cfg, out))}
    for entry in load_claims(PAPER / "claims.yaml"):
        if entry["metric"].startswith("fragile."):
            continue  # made by the fragile sweep, which trains
        r = evaluate_claim(entry, metrics, "tiny")
        assert r.n == 3 and r.unit == "seed", (entry["id"], r.note)
        assert r.evidence == ("paired" if "ref" in entry["test"] else "sample"), entry["id"]
        assert r.status != "NOT RUN", (entry["id"], r.note)
        if "ref" in entry["test"]:
            assert lookup(metrics, entry["test"]["ref"])["n"] == 3
    rise = evaluate_claim(next(e for e in load_claims(PAPER / "claims.yaml") if e["id"] == "freebind.lambda_t_at_rises"),
                          metrics, "tiny")
    assert rise.status == "PASS" and rise.reproduced == pytest.approx(4.0)
