"""The workflow on a real SLURM cluster: `snakemake --profile profiles/slurm` submits every job with
sbatch (snakemake-executor-plugin-slurm), here the fixture paper plus one real paper at smoke.

Needs `sbatch`; as root it starts the one-node cluster of .ci/slurm_up.sh when none answers (CI does
that itself). The profile's resources are used as written, so a GPU rule must land on the `gpu`
partition with a GPU request and every other rule on `cpu` without one.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest
import yaml

from conftest import FIXTURE_PAPERS, REPO, WORKFLOW_ENV
from shared.machine_speed import slowdown

SBATCH_LIMIT_S = 1800   # the sbatch run's limit on the reference machine of shared.machine_speed
REAL_PAPER = "freebind"   # a real paper with GPU and CPU rules and the fewest smoke jobs (24 with the fixture; EVEREST 42):
# the plugin polls job states with a growing pause, so a job costs 15–35 s here whatever it computes
PROFILE = yaml.safe_load((REPO / "profiles/slurm/config.v8+.yaml").read_text())
# Lightning trainings whose GPUs the rule asks for (trainer.devices per node, Snakefile slurm_training),
# not the profile; the profile gives them the GPU partition.
# Read from the rules file, so a new training rule cannot miss the profile's GPU partition.
TRAINING_RULES = tuple(re.findall(r"^rule (\w+):(?:\n    .*)*?\n    resources: \*\*EV_TRAINING_RESOURCES",
                                  (REPO / "papers/everest/rules.smk").read_text(), re.M))


# trainings that run every seed in series at smoke and tiny; at full each seed is a job of its own
# (everest_*_seed) and these rules give way to CPU jobs merging the seeds' records (everest_*_merge)
IN_SERIES_RULES = ("everest_pretrain_checkpoints", "everest_finetune_top1", "everest_budget_pretrain_checkpoints",
                   "everest_budget_finetune_top1")


def effective_args(*argv: str):
    """Snakemake's parsed command line as it would run from the repo root (profiles applied)."""
    from snakemake.cli import parse_args

    cwd = os.getcwd()
    try:
        os.chdir(REPO)
        return parse_args(list(argv))[1]
    finally:
        os.chdir(cwd)


def test_workflow_profile_does_not_override_the_cluster_profile():
    """profiles/default is always loaded as the workflow profile, after --profile: it must not reset
    the cluster's latency-wait, cores or jobs (it did: latency-wait 5 replaced 60, cores: all applied)."""
    slurm = effective_args("--profile", "profiles/slurm", "-n")
    assert slurm.executor == "slurm" and slurm.latency_wait == PROFILE["latency-wait"] == 60
    assert slurm.jobs == PROFILE["jobs"] and slurm.cores is None
    local = effective_args("--cores", "2", "-n")
    assert local.executor is None and local.cores == 2 and local.rerun_incomplete   # defaults still apply


def gpu_rules() -> set[str]:
    return {r for r, res in PROFILE["set-resources"].items() if res.get("gpu") or res.get("gres")} | set(TRAINING_RULES)


def test_gpu_only_where_cuda_is_used():
    """GPU requests only on the GPU partition, never for MMP (no CUDA) or the bookkeeping rules; every
    rule without a GPU on the CPU partition."""
    assert PROFILE["default-resources"]["slurm_partition"] == "cpu"
    for rule, res in PROFILE["set-resources"].items():
        gpu = bool(res.get("gpu") or res.get("gres")) or rule in TRAINING_RULES
        assert res.get("slurm_partition", "cpu") == ("gpu" if gpu else "cpu"), rule
    assert len(TRAINING_RULES) >= 2, TRAINING_RULES
    for rule in TRAINING_RULES:   # sbatch would otherwise ask a GPU on the CPU partition
        assert PROFILE["set-resources"].get(rule, {}).get("slurm_partition") == "gpu", rule
    bad = {r for r in gpu_rules() if r.startswith(("mmp_", "paper_", "claims_", "overview_", "kernels_"))}
    assert not bad, f"GPU asked for rules that never use CUDA: {bad}"


def dry_run_jobs(tmp_path, *options: str, config: tuple[str, ...] = ()) -> dict[str, tuple[dict, str]]:
    """rule -> (resources, shell command) of EVEREST's full-profile trainings, as `snakemake -n` prints
    them with these options (a profile, or --cores) and extra --config entries."""
    targets = [tmp_path / f"full/everest/metrics/{k}finetune_everest.json" for k in ("", "knob_", "budget_")]   # and pre-training
    cmd = [sys.executable, "-m", "snakemake", "-n", "--nolock", *map(str, targets), *options,
           "--config", "profile=full", f"results={tmp_path}", *config]
    run = subprocess.run(cmd, cwd=REPO, env=WORKFLOW_ENV, capture_output=True, text=True, timeout=300)
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-3000:]
    job = re.compile(r"^rule (\w+):$.*?^ +resources: (.*?)$.*?^Shell command: (.*?)$", re.S | re.M)
    jobs = {rule: (dict(kv.split("=", 1) for kv in resources.split(", ")), shell)
            for rule, resources, shell in job.findall(log) if rule in TRAINING_RULES}
    assert set(jobs) == set(TRAINING_RULES) - set(IN_SERIES_RULES), log[-3000:]   # at full: a job per seed
    return jobs


def sbatch_call(rule: str, resources: dict) -> str:
    """The sbatch command line the pinned SLURM plugin builds from a job's resources (no cluster needed)."""
    from types import SimpleNamespace

    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    class Resources(dict):
        __getattr__ = dict.__getitem__

    typed = Resources({k: int(v) if v.isdigit() else v for k, v in resources.items()})
    job = SimpleNamespace(name=rule, threads=1, resources=typed)
    params = {"run_uuid": "u", "slurm_logfile": "log", "comment_str": f"rule_{rule}", "account": "",
              "partition": f"-p {typed.slurm_partition}", "workdir": str(REPO)}
    return get_submit_command(job, params) + set_gres_string(job)


@pytest.mark.parametrize("trainer", [{}, {"devices": 4, "num_nodes": 2, "strategy": "ddp"}], ids=["full", "4x2"])
def test_training_rules_ask_slurm_for_their_trainer(trainer, tmp_path):
    """Under the SLURM profile, EVEREST's trainings ask for what Lightning will check: --nodes = num_nodes,
    --ntasks-per-node = devices and devices GPUs per node, with one task per GPU started by srun above
    one GPU; the training gets the same trainer settings. The config's full profile, and 4 GPUs × 2
    nodes through --config everest_trainer."""
    from shared.config import load_config

    overrides = [f"trainer.{k}={v}" for k, v in trainer.items()]
    want = load_config(REPO / "papers/everest/config.yaml", "full", overrides).trainer
    devices, nodes = want.devices, want.num_nodes
    config = ("everest_trainer={" + ", ".join(f"{k}: {v}" for k, v in trainer.items()) + "}",) if trainer else ()
    for rule, (resources, shell) in dry_run_jobs(tmp_path, "--profile", "profiles/slurm", config=config).items():
        asked = (resources["nodes"], resources["tasks_per_node"], resources["gres"])
        assert asked == (str(nodes), str(devices), f"gpu:{devices}"), rule
        assert resources["slurm_partition"] == "gpu", rule
        sbatch = sbatch_call(rule, resources)
        assert f" --nodes={nodes} " in sbatch and sbatch.endswith(f" --gres=gpu:{devices}"), sbatch
        assert "--gpus" not in sbatch and "--ntasks-per-gpu" not in sbatch, sbatch   # no job-wide or per-GPU counts
        assert all(f"--set {o}" in shell for o in overrides), shell   # Lightning gets the same trainer
        assert shell.startswith(f"OMP_NUM_THREADS={resources['cpus_per_task']} "), shell   # the CPUs it asks
        if devices * nodes == 1:   # one task, run by the plugin's own job step; no srun in the command
            assert "mpi" not in resources and "srun" not in shell and "--ntasks-per-node" not in sbatch, (rule, shell)
        else:
            assert resources["mpi"] == "srun" and f" --ntasks-per-node={devices} " in sbatch, sbatch
            srun = (f"OMP_NUM_THREADS={resources['cpus_per_task']} srun --nodes={nodes} --ntasks-per-node={devices} --gres=gpu:{devices} "
                    f"--cpus-per-task={resources['cpus_per_task']} ")
            assert shell.startswith(srun) and " -m papers.everest " in shell, shell


def test_full_profile_runs_every_everest_seed_as_a_job_of_its_own(tmp_path):
    """A dry run of the full profile under profiles/slurm: each seed of each EVEREST training is its own
    job (`<experiment>_seed --seed S`) with the training's GPU resources and its own runtime, and the
    arm's metrics come from a CPU job that merges them; no job runs the seeds in series."""
    from shared.config import load_config

    seeds = [int(s) for s in load_config(REPO / "papers/everest/config.yaml", "full").seeds]
    assert len(seeds) > 1
    targets = [tmp_path / f"full/everest/metrics/{k}_everest.json"
               for k in ("pretrain", "finetune", "budget_pretrain", "budget_finetune")]
    cmd = [sys.executable, "-m", "snakemake", "-n", "--nolock", *map(str, targets), "--profile", "profiles/slurm",
           "--config", "profile=full", f"results={tmp_path}"]
    run = subprocess.run(cmd, cwd=REPO, env=WORKFLOW_ENV, capture_output=True, text=True, timeout=300)
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-3000:]
    job = re.compile(r"^rule (\w+):$(.*?)^ +resources: (.*?)$.*?^Shell command: (.*?)$", re.S | re.M)
    jobs = []
    for rule, middle, resources, shell in job.findall(log):
        wc = re.search(r"^ +wildcards: (.*?)$", middle, re.M)
        wildcards = dict(kv.split("=", 1) for kv in wc.group(1).split(", ")) if wc else {}
        jobs.append((rule, wildcards, dict(kv.split("=", 1) for kv in resources.split(", ")), shell))
    assert not {r for r, *_ in jobs} & set(IN_SERIES_RULES), log[-3000:]
    entries = PROFILE["set-resources"]
    for kind, arm in (("pretrain", "everest"), ("finetune", "everest"), ("budget_pretrain", "everest"),
                      ("budget_finetune", "everest")):
        rule = f"everest_{kind}_seed"
        mine = [(w, res, sh) for r, w, res, sh in jobs if r == rule and w["arm"] == arm]
        assert sorted(int(w["seed"]) for w, _, _ in mine) == seeds, (rule, mine)
        for w, res, sh in mine:
            assert res["gres"] == "gpu:1" and res["slurm_partition"] == "gpu", (rule, res)
            assert int(res["runtime"]) == entries[rule]["runtime"] and int(res["mem_mb"]) == entries[rule]["mem_mb"]
            assert f" {kind}_{arm}_seed " in sh and sh.endswith(f" --seed {w['seed']}"), sh
        merge = [(res, sh) for r, w, res, sh in jobs if r == f"everest_{kind}_merge" and w["arm"] == arm]
        assert len(merge) == 1, (kind, merge)
        res, sh = merge[0]
        assert res["slurm_partition"] == "cpu" and "gres" not in res and "--seed" not in sh, (kind, res, sh)
        assert f" {kind}_{arm} " in sh, sh


def test_local_training_runs_without_srun(tmp_path):
    """A local run (`--cores`) runs the trainings' plain command, multi-GPU too (Lightning starts the
    processes itself): no srun and no MPI job."""
    jobs = dry_run_jobs(tmp_path, "--cores", "1", config=("everest_trainer={devices: 4}",))
    for rule, (resources, shell) in jobs.items():
        assert shell.startswith(f"OMP_NUM_THREADS=1 {sys.executable} -m papers.everest "), shell
        assert "srun" not in shell and " --set trainer.devices=4" in shell, shell
        assert "mpi" not in resources, (rule, resources)


def job_record(jid: str) -> tuple[str, str, str] | None:
    """(state, partition, GPU request) of a SLURM job from slurmctld (kept MinJobAge after it ends)."""
    out = subprocess.run(["scontrol", "show", "job", "-o", jid], capture_output=True, text=True).stdout
    f = dict(kv.split("=", 1) for kv in out.split() if "=" in kv)
    if "JobState" not in f:
        return None
    gres = f.get("TresPerJob", "") + f.get("TresPerNode", "")
    return f["JobState"], f["Partition"], "gpu:1" if "gpu:1" in gres else "none"


def cluster_answers() -> bool:
    return subprocess.run(["sinfo", "-h"], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def cluster():
    if shutil.which("sbatch") is None:
        pytest.skip("no SLURM client here (sbatch not found); CI installs one with .ci/slurm_up.sh")
    if not cluster_answers():
        if os.geteuid() != 0:
            pytest.skip("sbatch is installed but no cluster answers sinfo, and starting one needs root")
        up = subprocess.run([str(REPO / ".ci/slurm_up.sh")], capture_output=True, text=True)
        assert up.returncode == 0, up.stdout + up.stderr
    return True


@pytest.mark.workflow
def test_fixture_and_real_paper_through_sbatch(cluster, tmp_path):
    papers = tmp_path / "papers"      # the fixture paper and one real paper side by side
    papers.mkdir()
    (papers / "toy").symlink_to(FIXTURE_PAPERS / "toy")
    (papers / REAL_PAPER).symlink_to(REPO / "papers" / REAL_PAPER)
    results, logdir = tmp_path / "results", tmp_path / "slurm_logs"
    cmd = [sys.executable, "-m", "snakemake", "--profile", "profiles/slurm", "--nolock", "--jobs", "4",
           "--slurm-init-seconds-before-status-checks", "2", "--slurm-status-command", "squeue",
           "--slurm-logdir", str(logdir), "--slurm-keep-successful-logs", "--retries", "0",
           "--config", "profile=smoke", f"results={results}", f"papers_dir={papers}"]
    start = time.monotonic()
    # 24 cold jobs through sbatch beside the other test worker: 900 s was too short on the reference machine
    # (shared/machine_speed.py); the limit is there to end a hang, and follows the machine's speed
    run = subprocess.run(cmd, cwd=REPO, env=WORKFLOW_ENV, capture_output=True, text=True,
                         timeout=round(SBATCH_LIMIT_S * slowdown()))
    log = run.stdout + run.stderr
    (tmp_path / "snakemake.log").write_text(log)
    assert run.returncode == 0, log[-5000:]

    smoke = results / "smoke"
    for nb in [smoke / "toy/toy.ipynb", smoke / REAL_PAPER / f"{REAL_PAPER}.ipynb", smoke / "overview.ipynb"]:
        assert nb.is_file(), f"missing executed notebook {nb}"
    claims = json.loads((smoke / "claims.json").read_text())["claims"]
    assert [c["status"] for c in claims if c["paper"] == "toy"] == ["PASS", "FAIL", "INCONCLUSIVE", "NOT RUN", "NOT RUN"]
    assert any(c["paper"] == REAL_PAPER for c in claims)

    # every job went through sbatch: one SLURM job id per snakemake job, each COMPLETED in squeue
    submitted = dict(re.findall(r"Job \d+ has been submitted with SLURM jobid (\d+) \(log: ([^)]+)\)", log))
    finished = re.findall(r"Finished jobid: \d+ \(Rule: (\w+)\)", log)
    assert len(submitted) == len([r for r in finished if r != "all"]) > 10, log[-3000:]
    rows = {jid: job_record(jid) for jid in submitted}
    assert all(rows.values()), f"slurmctld forgot jobs: {[j for j, r in rows.items() if not r]}"
    assert {s for s, _, _ in rows.values()} == {"COMPLETED"}, rows
    # the plugin names each job's log folder after its rule: <logdir>/rule_<name>/[<wildcards>/]<jobid>.log
    rule_of = {jid: re.search(r"/rule_(\w+)/", path).group(1) for jid, path in submitted.items()}
    assert set(rule_of.values()) == set(finished) - {"all"}
    for jid, rule in rule_of.items():
        want = ("gpu", "gpu:1") if rule in gpu_rules() else ("cpu", "none")
        assert rows[jid][1:] == want, (rule, jid, rows[jid])
    assert gpu_rules() & set(rule_of.values()), "no GPU rule ran: the real paper should have one"
    excerpt = "\n".join(f"{jid:>5} {rule_of[jid]:28s} " + " ".join(rows[jid]) for jid in sorted(rule_of, key=int))
    summary = f"{len(submitted)} sbatch jobs in {time.monotonic() - start:.0f} s\n{excerpt}\n"
    (tmp_path / "slurm_jobs.txt").write_text(summary)
    print(summary)


def test_every_full_profile_job_has_its_own_resources(tmp_path):
    """A dry run of the full profile under profiles/slurm: every job's rule has its own entry (the
    defaults' 2 h on a CPU node silently sent GPU work to the wrong partition), with a runtime and
    memory; a GPU job is on the GPU partition (test_gpu_only_where_cuda_is_used; entries for rules
    that do not exist: tests/test_layout.py)."""
    cmd = [sys.executable, "-m", "snakemake", "-n", "--nolock", "--profile", "profiles/slurm",
           "--config", "profile=full", f"results={tmp_path}"]
    run = subprocess.run(cmd, cwd=REPO, env=WORKFLOW_ENV, capture_output=True, text=True, timeout=300)
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-3000:]
    jobs = re.findall(r"^(?:local)?rule (\w+):$.*?^ +resources: (.*?)$", log, re.S | re.M)
    assert len(jobs) > 50, log[-3000:]
    entries = PROFILE["set-resources"]
    for rule, resources in jobs:
        if rule == "all":
            continue
        assert rule in entries, f"{rule} runs at full with the default resources: give it an entry"
        asked = dict(kv.split("=", 1) for kv in resources.split(", "))
        assert int(asked["runtime"]) > 0 and int(asked["mem_mb"]) > 0, (rule, asked)
        assert asked["slurm_partition"] == entries[rule].get("slurm_partition", "cpu"), (rule, asked)
