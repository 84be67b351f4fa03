"""Every long arm checkpoints and resumes: an arm of `eval.checkpoint_arms` keeps each fold's
last.ckpt and a rerun restores it (same metrics, no retraining); the full profile names every trained
arm; an unknown arm stops the run."""
import json

import pytest

from shared.config import load_config
from shared.experiment import Run
from conftest import REPO

CFG = REPO / "papers" / "mmp" / "config.yaml"


def test_the_full_profile_checkpoints_every_trained_arm():
    from papers.mmp.experiments.arms import TRAINED_ARMS

    cfg = load_config(CFG, "full")
    assert set(cfg.eval.checkpoint_arms) | {"mmp_trans"} == set(TRAINED_ARMS)


def test_a_checkpointed_arm_keeps_last_ckpt_per_fold_and_a_rerun_restores_it(tmp_path, monkeypatch):
    from papers.mmp.experiments import cindex_arm

    cfg = load_config(CFG, "smoke", ["eval.checkpoint_arms=[abmil]"])
    first = cindex_arm("abmil")(Run("mmp", "cindex_abmil", cfg, tmp_path))
    for fold in range(cfg.eval.n_folds):
        assert (tmp_path / "checkpoints" / "cindex_abmil" / f"fold{fold}" / "checkpoints" / "last.ckpt").is_file()
    # a rerun restores every fold's finished fit: no training step runs, and the scores are the same
    from papers.mmp import survival_module

    def no_training(*args, **kwargs):
        raise AssertionError("a restored fit must not train")

    monkeypatch.setattr(survival_module.SurvivalModule, "training_step", no_training)
    again = cindex_arm("abmil")(Run("mmp", "cindex_abmil", cfg, tmp_path))
    assert json.dumps(again["cindex"]) == json.dumps(first["cindex"])


def test_an_unchecked_arm_keeps_no_checkpoint_and_an_unknown_arm_stops(tmp_path):
    from papers.mmp.experiments import cindex_arm

    cfg = load_config(CFG, "smoke")
    cindex_arm("pathway")(Run("mmp", "cindex_pathway", cfg, tmp_path))
    assert not list(tmp_path.rglob("*.ckpt"))
    bad = load_config(CFG, "smoke", ["eval.checkpoint_arms=[prototype_cox]"])
    with pytest.raises(ValueError, match="checkpoint_arms"):
        cindex_arm("pathway")(Run("mmp", "cindex_pathway", bad, tmp_path))
