"""`cindex_table` keeps every arm's c-index as a fold sample, pairs MMP-OT with MMP-Trans on the
same folds, refuses arms run on different folds, and the c-index claims decide on those samples."""
from pathlib import Path

import pytest

from papers.mmp.experiments import cindex_table
from shared.claims import PASS, evaluate_claim, load_claims
from shared.config import load_config
from shared.experiment import Run
from shared.io import read_json, write_json
from shared.samples import sample

PAPER = Path(__file__).resolve().parents[2] / "papers" / "mmp"
SITES = [[0, 5], [1, 6], [2, 7], [3, 8], [4, 9]]
CINDEX = {"abmil": [0.80, 0.85, 0.78, 0.83, 0.86], "pathway": [0.55, 0.60, 0.50, 0.58, 0.52],
          "mmp_trans": [0.70, 0.72, 0.66, 0.71, 0.69], "mmp_ot": [0.69, 0.73],
          "full_transformer": [0.81, 0.84, 0.80, 0.82, 0.85], "prototype_cox": [0.86, 0.88, 0.84, 0.87, 0.85]}
ORACLE = [0.90, 0.92, 0.89, 0.93, 0.91]


def write_arms(tmp_path, sites=SITES):
    for arm, values in CINDEX.items():
        n = len(values)
        write_json(tmp_path / "metrics" / f"cindex_{arm}.json",
                   {"cindex": sample(values, "fold"), "n_folds": n, "test_sites": sites[:n],
                    "oracle": sample(ORACLE[:n], "fold")})


def tiny_run(tmp_path):
    return Run("mmp", "cindex", load_config(PAPER / "config.yaml", "tiny"), tmp_path)


def test_cindex_table_keeps_fold_samples_and_pairs_ot_folds(tmp_path):
    write_arms(tmp_path)
    metrics = cindex_table(tiny_run(tmp_path))
    for arm, values in CINDEX.items():
        assert metrics[arm]["unit"] == "fold" and metrics[arm]["values"] == pytest.approx(values)
        assert metrics[arm]["n"] == len(values)
    assert metrics["oracle"]["values"] == pytest.approx(ORACLE)
    assert metrics["mmp_trans_on_ot_folds"]["values"] == pytest.approx(CINDEX["mmp_trans"][:2])
    assert metrics["ot_minus_trans"]["values"] == pytest.approx([-0.01, 0.01])
    table = (tmp_path / "tables" / "cindex.md").read_text()
    assert "0.696 ± 0.023" in table          # MMP-Trans: mean ± std (ddof 1) over its 5 folds


def test_cindex_table_refuses_arms_on_different_folds(tmp_path):
    write_arms(tmp_path)
    part = read_json(tmp_path / "metrics" / "cindex_pathway.json")
    part["test_sites"] = SITES[::-1]
    write_json(tmp_path / "metrics" / "cindex_pathway.json", part)
    with pytest.raises(ValueError, match="cindex_pathway.json tested on sites"):
        cindex_table(tiny_run(tmp_path))


def test_cindex_claims_decide_on_paired_folds(tmp_path):
    write_arms(tmp_path)
    metrics = {"cindex": cindex_table(tiny_run(tmp_path))}
    claims = {c["id"]: c for c in load_claims(PAPER / "claims.yaml")}
    status = {cid: evaluate_claim(claims[cid], metrics, "tiny") for cid in
              ("mmp.trans_beats_mean_floor", "mmp.trans_vs_abmil", "mmp.trans_vs_pathway", "mmp.ot_vs_trans")}
    assert status["mmp.trans_beats_mean_floor"].status == PASS
    assert status["mmp.trans_vs_abmil"].status == "FAIL"            # below ABMIL on every fold
    assert status["mmp.trans_vs_abmil"].evidence == "paired" and status["mmp.trans_vs_abmil"].n == 5
    assert status["mmp.trans_vs_pathway"].status == PASS            # above pathway-only on every fold
    assert status["mmp.ot_vs_trans"].status == "INCONCLUSIVE"       # 2 OT folds
    assert status["mmp.ot_vs_trans"].n == 2
