"""The MMP-Trans diagnostics: where the fused model's attention and head look, and that the
diagnostic's default row is the workflow's MMP-Trans arm (same folds, seeds, tokens)."""
import numpy as np
import pytest
import torch

from papers.mmp.models import MMP
from shared.config import load_config
from conftest import REPO

CFG = REPO / "papers" / "mmp" / "config.yaml"


def test_fusion_usage_reads_histology_columns_and_the_heads_histology_share():
    from papers.mmp.experiments.trans_diagnostics import fusion_usage

    pathways = [np.arange(i, i + 4) for i in range(10)]
    model = MMP(9, 6, pathways, dim=8, code_dim=4, snn_dropout=0.0, dropout=0.0, n_out=1).eval()
    torch.nn.init.zeros_(model.qkv.weight)                   # all scores 0: pathway rows attend uniformly
    batch = {"hist": torch.randn(5, 6, 9), "genes": torch.randn(5, 13)}
    u = fusion_usage(model, batch)
    assert u["uniform_on_hist"] == pytest.approx(6 / 16)
    assert u["path_rows_on_hist"] == pytest.approx(6 / 16, abs=1e-6)
    # histology rows see softmax([1/P, ..., 0, ...]): slightly less than uniform on histology columns
    assert 6 / 16 * 0.9 < u["hist_rows_on_hist"] < 6 / 16
    a = model.attn_dim
    with torch.no_grad():
        model.qkv.weight.normal_()                           # tokens now differ across patients
        model.head.weight[0, a:] = 0                         # the head ignores the histology mean
    assert fusion_usage(model, batch)["head_share_hist"] == pytest.approx(0.0, abs=1e-7)
    with torch.no_grad():
        model.head.weight.normal_()
        model.head.weight[0, :a] = 0                         # ... or the pathway mean
    assert fusion_usage(model, batch)["head_share_hist"] == pytest.approx(1.0)


def test_diagnostics_default_row_is_the_mmp_trans_arm(tmp_path):
    from papers.mmp.experiments import cindex_arm, trans_diagnostics
    from shared.experiment import Run

    cfg = load_config(CFG, "smoke", ["diagnostics.factors=[std_pi]", "diagnostics.variants=[genes_zeroed, few_pathways]"])
    diag = trans_diagnostics(Run("mmp", "trans_diagnostics", cfg, tmp_path))
    arm = cindex_arm("mmp_trans")(Run("mmp", "cindex_mmp_trans", cfg, tmp_path))
    assert diag["cindex"]["default"]["values"] == arm["cindex"]["values"]
    few = cfg.diagnostics.few_pathways
    assert diag["usage"]["few_pathways"]["uniform_on_hist"] == pytest.approx(
        cfg.prototypes.n / (few + cfg.prototypes.n))
    assert diag["gap"]["genes_zeroed"]["ref"] == "default" and diag["gap"]["genes_zeroed"]["n"] == cfg.eval.n_folds
    assert "genes zeroed" in (tmp_path / "tables" / "trans_diagnostics.md").read_text()
    # the standardised-π cell, built from the raw fold without refitting, is the std-π arm's training
    std = cindex_arm("mmp_trans_std_pi")(Run("mmp", "cindex_mmp_trans_std_pi", cfg, tmp_path))
    assert diag["cindex"]["std_pi"]["values"] == std["cindex"]["values"]
    assert diag["effects"]["std_pi"]["values"] == pytest.approx(
        [a - b for a, b in zip(std["cindex"]["values"], arm["cindex"]["values"])])
    assert "main: π standardised" in (tmp_path / "tables" / "trans_factorial.md").read_text()


def test_factorial_effects_recover_main_effects_and_interactions():
    """On a response built from known effects (per fold), `effects` returns them: the main effect is
    the mean gain of switching a factor on, an interaction the mean difference of differences."""
    from papers.mmp.factorial import cells, effects

    factors = ["a", "b", "c"]
    assert [name for name, _ in cells(factors)] == ["default", "a", "b", "c", "a+b", "a+c", "b+c", "a+b+c"]
    base, ga, gb, gc, gab, gabc = [0.6, 0.5, 0.7], 0.01, 0.003, -0.02, 0.07, 0.004
    scores = {}
    for name, on in cells(factors):
        scores[name] = [y0 + ga * ("a" in on) + gb * ("b" in on) + gc * ("c" in on)
                        + gab * ({"a", "b"} <= on) + gabc * (on == {"a", "b", "c"}) + 0.001 * i
                        for i, y0 in enumerate(base)]
    eff = effects(scores, factors, test_train_ratio=0.25)
    # a x b is on in 2 of the 4 cells with a on: its main effect picks up half of gab (and of gabc's quarter)
    assert eff["a"]["values"] == pytest.approx([ga + gab / 2 + gabc / 4] * 3)
    assert eff["a x b"]["values"] == pytest.approx([gab + gabc / 2] * 3)
    assert eff["a x c"]["values"] == pytest.approx([gabc / 2] * 3)
    assert eff["a x b x c"]["values"] == pytest.approx([gabc] * 3)
    assert eff["c"]["unit"] == "fold" and eff["c"]["test_train_ratio"] == 0.25
    with pytest.raises(ValueError, match="missing"):
        effects({k: v for k, v in scores.items() if k != "a+b"}, factors, 0.25)


def test_factorial_over_cohorts_reads_cohort_0_and_trains_the_others_as_trans_diagnostics(tmp_path):
    """`trans_factorial_cohorts`: cohort 0's cells are trans_diagnostics' own; cohort 1's equal
    trans_diagnostics run at seed 1; every effect is a fold sample grouped by cohort."""
    from papers.mmp.experiments import trans_diagnostics, trans_factorial_cohorts
    from shared.config import load_config
    from shared.experiment import Run
    from shared.io import read_json, write_json

    sets = ["diagnostics.factors=[std_pi,value_residual,epochs]", "diagnostics.cohort_factors=[std_pi,value_residual,epochs]",
            "diagnostics.variants=[]", "train.epochs=1"]
    cfg0 = load_config(REPO / "papers" / "mmp" / "config.yaml", "smoke", sets)
    cfg1 = load_config(REPO / "papers" / "mmp" / "config.yaml", "smoke", sets + ["seed=1"])
    own = trans_diagnostics(Run("mmp", "trans_diagnostics", cfg0, tmp_path / "s0"))
    other = trans_diagnostics(Run("mmp", "trans_diagnostics", cfg1, tmp_path / "s1"))
    write_json(tmp_path / "s0" / "metrics" / "trans_diagnostics.json", own)   # what the CLI writes
    own = read_json(tmp_path / "s0" / "metrics" / "trans_diagnostics.json")
    out = trans_factorial_cohorts(Run("mmp", "trans_factorial_cohorts", cfg0, tmp_path / "s0"))
    assert out["cohorts"] == [0, 1]
    for cell in out["cells"]:
        s = out["cindex"][cell]
        n0 = own["cindex"][cell]["n"]
        assert s["values"][:n0] == own["cindex"][cell]["values"]
        assert s["values"][n0:] == pytest.approx(other["cindex"][cell]["values"])
        assert s["groups"] == [0] * n0 + [1] * other["cindex"][cell]["n"] and s["group_unit"] == "cohort"
    inter = out["effects"]["std_pi_x_value_residual"]
    n0 = own["effects"]["std_pi_x_value_residual"]["n"]
    assert inter["values"][:n0] == own["effects"]["std_pi_x_value_residual"]["values"]
    assert inter["values"][n0:] == pytest.approx(other["effects"]["std_pi_x_value_residual"]["values"])
