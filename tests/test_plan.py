"""The full profile's cost plan (tools/plan.py): every job of the dry run has a row, a job whose
estimate exceeds its rule's limit fails the plan, and the command stays within its 2-minute budget."""
import csv
import subprocess
import sys
import time

import pytest

from conftest import REPO, WORKFLOW_ENV

sys.path.insert(0, str(REPO / "tools"))
import plan  # noqa: E402
from shared.config import load_config  # noqa: E402


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
    """(seconds, completed process, csv rows, dry-run jobs) of one `tools/plan.py` run (what `make plan` runs)."""
    tmp = tmp_path_factory.mktemp("plan")
    t = time.time()
    # the stated CPU rate, not one probed on a loaded test machine: the verdicts below do not move with load
    run = subprocess.run([sys.executable, "tools/plan.py", "--out", str(tmp / "plan")], cwd=REPO,
                         env={**WORKFLOW_ENV, "REPRO_PLAN_CPU_RATE": "stated"}, capture_output=True, text=True,
                         timeout=150)
    seconds = time.time() - t
    with (tmp / "plan.csv").open() as f:
        rows = list(csv.DictReader(f))
    return seconds, run, rows, plan.parse_jobs(plan.dry_run(str(tmp / "dry")))


def test_plan_cli_within_budget(cli):
    seconds, run, _, _ = cli
    assert seconds < 120, "make plan must stay within 2 minutes"
    assert run.returncode in (0, 1), run.stderr[-2000:]
    assert "GPU-h" in run.stdout and ("FAILED" in run.stdout) == (run.returncode == 1)


def test_plan_covers_every_full_profile_job(cli):
    _, run, rows, jobs = cli
    assert len(jobs) > 50 and "NO ESTIMATE" not in run.stdout
    assert sorted((r["rule"], r["job"]) for r in rows) == sorted(
        (j["rule"], j["wildcards"] or plan.experiment_of(j)[1] or j["rule"]) for j in jobs)
    for r in rows:
        assert float(r["limit_h"]) > 0 and float(r["mem_limit_GB"]) > 0 and r["flops_how"], r
    unfit = {(r["rule"], r["job"]) for r in rows if r["fits"] == "NO"}
    assert ("everest_pretrain_seed", "arm=videomae, seed=0") in {(r["rule"], r["job"]) for r in rows}   # a job per seed
    assert ("everest_pretrain_seed", "arm=videomae, seed=0") not in unfit  # fits once loader workers decode
    assert ("mmp_cindex_arm", "arm=abmil") in unfit                      # 8 threads at 20 GFLOP/s each vs 12 h
    assert ("mmp_cindex_arm", "arm=full_transformer") in unfit
    assert (run.returncode == 1) == bool(unfit)


def test_a_job_over_its_limit_fails_the_plan(cli):
    jobs = [j for j in cli[3] if j["rule"] == "freebind_main_table"]
    rows, _ = plan.plan(jobs)
    assert rows and all(r.fits for r in rows)
    jobs[0]["resources"]["runtime"] = "0.001"   # the limit monkeypatched down
    rows, _ = plan.plan(jobs)
    assert not rows[0].fits and "time" in rows[0].why


def test_a_job_without_an_estimate_is_an_error(cli):
    jobs = [dict(j, shell=j["shell"].replace(" main_table ", " no_such_experiment "))
            for j in cli[3] if j["rule"] == "freebind_main_table"]
    _, errors = plan.plan(jobs)
    assert errors and "no_such_experiment" in errors[0]


def test_e2gan_probe_step_runs_on_cpu_at_tiny_shapes():
    """(EVEREST, FreeBind and MMP: tests/test_gpu_smoke.py runs theirs through the smoke's loop.)"""
    from papers.e2gan.full_cost import probe_step

    probe_step(load_config(REPO / "papers/e2gan/config.yaml", "tiny"), "cpu")()


def test_p2l_probe_step_at_full_shape_on_meta():
    from papers.p2l.full_cost import probe_step

    probe_step(load_config(REPO / "papers/p2l/config.yaml", "full"), "meta")()


def test_measured_probe_steps_are_set_against_their_estimates(tmp_path):
    """Once `make gpu-smoke` has written its CSV, the plan reads it: measured / estimated per paper;
    a failed probe (an OOM) is a row with its status, not an error."""
    head = "paper,precision,s_per_step,peak_gib,status,gpu,driver,torch,cuda,triton\n"
    gpu = "NVIDIA H100 80GB HBM3,550.0,2.13.0,12.8,3.8"
    (tmp_path / "probe_steps.csv").write_text(head + f"mmp,32-true,0.5,1.0,ok,{gpu}\n"
                                              f"freebind,32-true,0,0,FAILED: OutOfMemoryError: x,{gpu}\n")
    section, ratios = plan.measured_against_estimated(tmp_path / "probe_steps.csv")
    assert set(ratios) == {"mmp"} and ratios["mmp"] > 1
    assert "OutOfMemoryError" in section and "| mmp |" in section


def test_an_auto_device_job_follows_its_rule(cli):
    """E²GAN's experiments use CUDA when the job has one: costed on the GPU once the rule asks a GPU."""
    jobs = [j for j in cli[3] if j["rule"] == "e2gan_finetune"][:1]
    jobs[0]["resources"] = {k: v for k, v in jobs[0]["resources"].items() if k not in ("gpu", "gres")}
    (cpu_row,), _ = plan.plan(jobs)
    jobs[0]["resources"]["gpu"] = "1"
    (gpu_row,), _ = plan.plan(jobs)
    assert (cpu_row.device, gpu_row.device) == ("cpu", "gpu")
    assert gpu_row.est_h["H100-SXM"] < cpu_row.est_h["H100-SXM"]
