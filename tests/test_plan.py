"""The full profile's cost plan (tools/plan.py): every job of the dry run has a row, a job whose
estimate exceeds its rule's limit fails the plan, and the command stays within its 2-minute budget."""
import subprocess
import sys
import time

import pytest

from conftest import REPO, WORKFLOW_ENV

sys.path.insert(0, str(REPO / "tools"))
import plan  # noqa: E402
from shared.config import load_config  # noqa: E402


@pytest.fixture(scope="module")
def dry_run_text(tmp_path_factory):
    return plan.dry_run(str(tmp_path_factory.mktemp("plan")))


def test_plan_covers_every_full_profile_job(dry_run_text):
    jobs = plan.parse_jobs(dry_run_text)
    assert len(jobs) > 50
    rows, errors = plan.plan(jobs)
    assert not errors, errors
    assert len(rows) == len(jobs)
    for r in rows:
        assert r.limit_h > 0 and r.mem_limit_gb > 0, r
        assert r.flops_how and all(h >= 0 for h in r.est_h.values()), r
    known = {(r.rule, r.job) for r in rows if not r.fits}
    assert ("everest_pretrain_checkpoints", "arm=videomae") in known      # 3 seeds × 100k steps in 48 h
    assert ("mmp_cindex_arm", "arm=abmil") in known                      # days on one CPU thread vs 12 h
    assert ("mmp_cindex_arm", "arm=full_transformer") in known


def test_a_job_over_its_limit_fails_the_plan(dry_run_text):
    jobs = [j for j in plan.parse_jobs(dry_run_text) if j["rule"] == "freebind_main_table"]
    rows, _ = plan.plan(jobs)
    assert rows and all(r.fits for r in rows)
    jobs[0]["resources"]["runtime"] = "0.001"   # the limit monkeypatched down
    rows, _ = plan.plan(jobs)
    assert not rows[0].fits and "time" in rows[0].why


def test_a_job_without_an_estimate_is_an_error(dry_run_text):
    jobs = [dict(j, shell=j["shell"].replace(" main_table ", " no_such_experiment "))
            for j in plan.parse_jobs(dry_run_text) if j["rule"] == "freebind_main_table"]
    _, errors = plan.plan(jobs)
    assert errors and "no_such_experiment" in errors[0]


@pytest.mark.parametrize("paper", ["everest", "e2gan", "freebind", "mmp"])
def test_probe_steps_run_on_cpu_at_tiny_shapes(paper):
    import importlib

    cfg = load_config(REPO / "papers" / paper / "config.yaml", "tiny")
    step = importlib.import_module(f"papers.{paper}.full_cost").probe_step(cfg, "cpu")
    step()


def test_p2l_probe_step_at_full_shape_on_meta():
    from papers.p2l.full_cost import probe_step

    probe_step(load_config(REPO / "papers/p2l/config.yaml", "full"), "meta")()


def test_plan_cli_within_budget(tmp_path):
    t = time.time()
    run = subprocess.run([sys.executable, "tools/plan.py", "--out", str(tmp_path / "plan")], cwd=REPO,
                         env=WORKFLOW_ENV, capture_output=True, text=True, timeout=150)
    assert time.time() - t < 120, "make plan must stay within 2 minutes"
    assert run.returncode in (0, 1), run.stderr[-2000:]
    assert "GPU-h" in run.stdout and (tmp_path / "plan.csv").is_file() and (tmp_path / "plan.md").is_file()
    assert ("FAILED" in run.stdout) == (run.returncode == 1)
