"""`cindex_table` keeps every arm's c-index as a fold sample, adds the mean-predictor floor and the
oracle ceilings, pairs MMP-Trans with every arm fold by fold, refuses arms run on different folds,
and the c-index claims decide on those samples."""
from pathlib import Path

import pytest

from papers.mmp.experiments import cindex_table
from shared.claims import FAIL, INCONCLUSIVE, PASS, evaluate_claim, load_claims
from shared.config import load_config
from shared.experiment import Run
from shared.io import read_json, write_json
from shared.samples import sample

PAPER = Path(__file__).resolve().parents[2] / "papers" / "mmp"
SITES = [[0, 5], [1, 6], [2, 7], [3, 8], [4, 9]]
CINDEX = {"abmil": [0.80, 0.85, 0.78, 0.83, 0.86], "pathway": [0.55, 0.60, 0.50, 0.58, 0.52],
          "mmp_histo": [0.66, 0.69, 0.64, 0.70, 0.66], "mmp_gene": [0.56, 0.61, 0.52, 0.57, 0.55],
          "mmp_trans": [0.70, 0.72, 0.66, 0.71, 0.69], "mmp_trans_std_pi": [0.75, 0.78, 0.72, 0.77, 0.74],
          "mmp_ot": [0.69, 0.73, 0.67, 0.70, 0.70],
          "full_transformer": [0.81, 0.84, 0.80, 0.82, 0.85], "prototype_cox": [0.86, 0.88, 0.84, 0.87, 0.85],
          "token_linear": [0.62, 0.66, 0.60, 0.63, 0.64], "token_mlp": [0.60, 0.61, 0.58, 0.66, 0.63]}
ORACLE = [0.90, 0.92, 0.89, 0.93, 0.91]
CEILINGS = {"proportions": [0.70, 0.72, 0.69, 0.71, 0.70], "grade": [0.68, 0.70, 0.66, 0.69, 0.67],
            "genes": [0.60, 0.62, 0.58, 0.61, 0.63], "all": [0.86, 0.88, 0.85, 0.87, 0.86]}


def write_arms(tmp_path, sites=SITES):
    for arm, values in CINDEX.items():
        n = len(values)
        write_json(tmp_path / "metrics" / f"cindex_{arm}.json",
                   {"cindex": sample(values, "fold"), "n_folds": n, "test_sites": sites[:n],
                    "oracle": sample(ORACLE[:n], "fold"), "mean_predictor": sample([0.5] * n, "fold"),
                    **({"token_spread": {"pi_input_std": 0.06, "pi_projected": 0.01, "mu_sigma_projected": 0.3,
                                         "ratio": 30.0}} if arm == "mmp_trans" else {})})
    write_json(tmp_path / "metrics" / "oracle_ceilings.json",
               {"ceilings": {k: sample(v, "fold") for k, v in CEILINGS.items()}, "n_folds": 5, "test_sites": sites})


def tiny_run(tmp_path):
    return Run("mmp", "cindex", load_config(PAPER / "config.yaml", "tiny"), tmp_path)


def test_cindex_table_keeps_fold_samples_floor_and_ceilings(tmp_path):
    write_arms(tmp_path)
    metrics = cindex_table(tiny_run(tmp_path))
    for arm, values in CINDEX.items():
        assert metrics[arm]["unit"] == "fold" and metrics[arm]["values"] == pytest.approx(values)
    assert metrics["oracle"]["values"] == pytest.approx(ORACLE)
    assert metrics["mean_predictor"]["values"] == [0.5] * 5
    assert metrics["ceiling_grade"]["values"] == pytest.approx(CEILINGS["grade"])
    assert metrics["trans_minus_mmp_ot"]["values"] == pytest.approx([0.01, -0.01, -0.01, 0.01, -0.01])
    assert metrics["trans_minus_mmp_histo"]["values"] == pytest.approx([0.04, 0.03, 0.02, 0.01, 0.03])
    table = (tmp_path / "tables" / "cindex.md").read_text()
    assert "0.696 ± 0.023" in table          # MMP-Trans: mean ± std (ddof 1) over its 5 folds
    assert "standardize_pi=false" in table and "standardize_pi=true" in table
    assert "Mean predictor" in table and "[0.500, 0.500]" in table
    assert "true grade shifts" in table
    spread = (tmp_path / "tables" / "token_spread.md").read_text()
    assert "MMP-Trans, standardize_pi=false" in spread and "30" in spread


def test_cindex_table_refuses_arms_on_different_folds(tmp_path):
    write_arms(tmp_path)
    part = read_json(tmp_path / "metrics" / "cindex_pathway.json")
    part["test_sites"] = SITES[::-1]
    write_json(tmp_path / "metrics" / "cindex_pathway.json", part)
    with pytest.raises(ValueError, match="cindex_pathway.json tested on sites"):
        cindex_table(tiny_run(tmp_path))


def test_cindex_claims_decide_on_paired_folds(tmp_path):
    write_arms(tmp_path)
    table = cindex_table(tiny_run(tmp_path))
    # one cohort's folds, as `replication` keeps them for a real cohort (the claims read replication.*)
    metrics = {"cindex": table, "replication": {"cindex": {arm: table[arm] for arm in CINDEX},
                                                "trans_minus": {"full_transformer": table["trans_minus_full_transformer"]}}}
    claims = {c["id"]: c for c in load_claims(PAPER / "claims.yaml")}
    ids = ("mmp.trans_beats_mean_floor", "mmp.trans_vs_abmil", "mmp.trans_vs_histo", "mmp.trans_vs_gene",
           "mmp.trans_vs_pathway", "mmp.ot_vs_trans", "mmp.trans_beats_token_linear", "mmp.trans_beats_token_mlp",
           "mmp.trans_noninferior_full_token")
    status = {cid: evaluate_claim(claims[cid], metrics, "tiny") for cid in ids}
    assert status["mmp.trans_beats_mean_floor"].status == PASS
    assert status["mmp.trans_vs_abmil"].status == FAIL            # below ABMIL on every fold
    assert status["mmp.trans_vs_abmil"].evidence == "paired" and status["mmp.trans_vs_abmil"].n == 5
    assert status["mmp.trans_vs_histo"].status == PASS            # above the histo arm on every fold
    assert status["mmp.trans_vs_gene"].status == PASS
    assert status["mmp.trans_vs_pathway"].status == PASS
    assert status["mmp.ot_vs_trans"].status == PASS               # gaps of ±0.01 on 5 folds: equivalent
    assert status["mmp.ot_vs_trans"].n == 5
    assert status["mmp.trans_beats_token_linear"].status == PASS and status["mmp.trans_beats_token_mlp"].status == PASS
    # 0.10 to 0.16 below the full-token model on every fold: worse than the 0.03 margin
    assert table["trans_minus_full_transformer"]["values"] == pytest.approx([-0.11, -0.12, -0.14, -0.11, -0.16])
    assert status["mmp.trans_noninferior_full_token"].status == FAIL
    # the same comparison on 2 folds cannot decide
    short = {"replication": {"cindex": {k: sample(v["values"][:2], "fold") for k, v in metrics["replication"]["cindex"].items()}}}
    assert evaluate_claim(claims["mmp.ot_vs_trans"], short, "tiny").status == INCONCLUSIVE
