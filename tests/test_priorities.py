"""Job priorities at tiny: a job's priority is its longest path to the end, so none may sit below a job
that needs its output. Snakemake does not raise a job's priority to its dependents', so a low-priority
producer (P2L's attribute classifier once sat at 50 under main tasks at 400) waits behind every
other paper's jobs while the longest chain of the workflow waits on it."""
import re
import subprocess
import sys

from conftest import REPO, WORKFLOW_ENV

JOB = re.compile(r"^(?:local)?rule (\w+):\n(.*?)(?=^\S|\Z)", re.M | re.S)


def dry_run_jobs(results) -> list[dict]:
    """[{rule, inputs, outputs, priority}] of every job of the tiny profile's dry run."""
    run = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--nolock", "--config", "profile=tiny",
                          f"results={results}"], cwd=REPO, env=WORKFLOW_ENV, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, (run.stdout + run.stderr)[-2000:]
    jobs = []
    for rule, body in JOB.findall(run.stdout + run.stderr):
        field = {k: v for k, v in re.findall(r"^ +(input|output|priority): (.*)$", body, re.M)}
        jobs.append({"rule": rule, "inputs": set(field.get("input", "").split(", ")) - {""},
                     "outputs": set(field.get("output", "").split(", ")) - {""},
                     "priority": int(field.get("priority", 0))})
    return jobs


def inversions(jobs: list[dict]) -> list[str]:
    producer = {out: job for job in jobs for out in job["outputs"]}
    return sorted({f"{producer[f]['rule']} ({producer[f]['priority']}) feeds {job['rule']} ({job['priority']})"
                   for job in jobs for f in job["inputs"]
                   if f in producer and producer[f]["priority"] < job["priority"]})


def test_no_job_has_a_lower_priority_than_a_job_that_needs_it(tmp_path):
    jobs = dry_run_jobs(tmp_path)
    assert len(jobs) > 50 and any(j["rule"] == "p2l_classifier" for j in jobs)
    assert inversions(jobs) == []


def test_the_check_finds_an_inversion():
    jobs = [{"rule": "a", "inputs": set(), "outputs": {"x"}, "priority": 50},
            {"rule": "b", "inputs": {"x"}, "outputs": {"y"}, "priority": 400}]
    assert inversions(jobs) == ["a (50) feeds b (400)"]
    jobs[0]["priority"] = 400
    assert inversions(jobs) == []
