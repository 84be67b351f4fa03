"""The comparisons over cohorts: the workflow's own cohort comes from the arms' metrics files, each
further cohort seed is run as the arm experiments run at that seed, and every c-index is a sample of
folds grouped by cohort, which the ledger decides on the cohort means."""
from pathlib import Path

import pytest

from shared.config import load_config
from shared.experiment import Run
from shared.io import write_json

PAPER = Path(__file__).resolve().parents[2] / "papers" / "mmp"
ARMS = ["mmp_trans", "pathway", "token_linear"]


def test_replication_groups_folds_by_cohort_and_matches_the_arm_experiment_at_that_seed(tmp_path):
    from papers.mmp.experiments import cindex_arm
    from papers.mmp.experiments.replication import replication
    from shared.claims_evidence import gather

    cfg = load_config(PAPER / "config.yaml", "smoke", [f"replication.arms=[{', '.join(ARMS)}]"])
    own = {arm: cindex_arm(arm)(Run("mmp", f"cindex_{arm}", cfg, tmp_path)) for arm in ARMS}
    for arm, metrics in own.items():                  # what the CLI writes after each arm experiment
        write_json(tmp_path / "metrics" / f"cindex_{arm}.json", metrics)
    out = replication(Run("mmp", "replication", cfg, tmp_path))
    n = cfg.eval.n_folds
    for arm in ARMS:
        s = out["cindex"][arm]
        assert s["group_unit"] == "cohort" and s["groups"] == [0] * n + [1] * n
        assert s["values"][:n] == own[arm]["cindex"]["values"]
    # cohort 1 is what the arm experiment gives when the whole run is seeded 1
    other = load_config(PAPER / "config.yaml", "smoke", ["seed=1"])
    at_one = cindex_arm("pathway")(Run("mmp", "cindex_pathway", other, tmp_path / "seed1"))
    assert out["cindex"]["pathway"]["values"][n:] == pytest.approx(at_one["cindex"]["values"])
    g = out["trans_minus"]["pathway"]
    assert g["gap"] and g["groups"] == [0] * n + [1] * n
    ev = gather("replication.trans_minus.pathway", g, None, None, 1.0)
    assert ev.n == 2 and ev.unit == "cohort"          # decided on the 2 cohort means: INCONCLUSIVE (< 3)
    assert "cohort 1" in (tmp_path / "tables" / "replication.md").read_text()
