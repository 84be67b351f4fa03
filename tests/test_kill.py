"""Kill tests that kill: each paper's main training runs as a subprocess at smoke, is SIGKILLed mid-epoch
after a step checkpoint (and one more trained step), is rerun to completion, and must end with the
metrics and weights of the uninterrupted run (the workflow's smoke run, `smoke_every_paper`).

The killed run goes through a launcher that adds one callback to every `make_trainer`: after the first
mid-epoch checkpoint it trains one more step, writes a marker file and sleeps, so the test kills a
process that has trained past its checkpoint (the resume must redo that step). Every subprocess has a
timeout, so the test cannot hang.

P2L's solving jobs train nothing: `main_sr` at smoke is killed after it has kept two solver batches
(`papers.p2l.solve_cache`; a launcher wraps its `save` the same way), rerun, and must write the metrics of
the uninterrupted smoke run, having read the two kept batches instead of solving them again.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
# as the workflow runs (the reference): without the test-wide Triton interpreter, which would compute
# MMP's GMM tokens in the interpreter (1e-7 apart from the workflow's, and minutes slower)
ENV = {**{k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"},
       "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled", "CI": "true"}
TIMEOUT = 240

LAUNCHER = '''
import os, runpy, sys, time
from pathlib import Path

import shared.training as T

marker = Path(os.environ["KILL_TEST_MARKER"])
make = T.make_trainer


def make_trainer(*args, **kwargs):
    import lightning as L

    class PauseAfterMidEpochCheckpoint(L.Callback):
        saved = None

        def on_save_checkpoint(self, trainer, pl_module, checkpoint):
            if self.saved is None and trainer.global_step % trainer.num_training_batches:
                self.saved = trainer.global_step

        def on_train_batch_end(self, trainer, *rest):
            if self.saved is not None and trainer.global_step == self.saved + 1 and not marker.exists():
                marker.write_text(f"{trainer.default_root_dir} {self.saved}")
                time.sleep(600)

    kwargs["callbacks"] = [*(kwargs.get("callbacks") or []), PauseAfterMidEpochCheckpoint()]
    return make(*args, **kwargs)


T.make_trainer = make_trainer
paper = sys.argv.pop(1)
runpy.run_module(f"papers.{paper}", run_name="__main__", alter_sys=True)
'''

# paper -> (experiment, --set overrides): each paper's main training at smoke, small every_n_train_steps
CASES = {
    "everest": ("pretrain_everest", ["trainer.every_n_train_steps=2"]),
    "p2l": ("train_prior", ["trainer.every_n_train_steps=2"]),
    "freebind": ("bonds_s0", ["trainer.every_n_train_steps=2"]),
    # MMP's main training (MMP-Trans, every fold): at smoke fold 1 has 3 batches an epoch, so its step-2
    # checkpoint is mid-epoch (fold 0 finishes first and is restored from its final checkpoint on the rerun)
    "mmp": ("cindex_mmp_trans", ["trainer.every_n_train_steps=2"]),
    # E2GAN's main training: the clustered base (6 steps at smoke, one epoch, so step 2 is mid-epoch)
    "e2gan": ("base_clustered", ["trainer.every_n_train_steps=2"]),
}
TIMING_KEYS = ("timing", "train_wall_s", "wall_time_s", "wall_s", "runtime_ratio_to_ldps")


def command(paper: str, out: Path, launcher: Path | None = None) -> list[str]:
    experiment, overrides = CASES[paper]
    head = [sys.executable, str(launcher), paper] if launcher else [sys.executable, "-m", f"papers.{paper}"]
    return [*head, experiment, "--profile", "smoke", "--out", str(out),
            *[a for o in overrides for a in ("--set", o)]]


def without_timing(value):
    if isinstance(value, dict):
        return {k: without_timing(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [without_timing(v) for v in value]
    return value


def final_state(out: Path, paper: str) -> tuple[dict, dict]:
    """(metrics without wall times, {checkpoint path: weights}) of the experiment's run under `out`."""
    experiment = CASES[paper][0]
    metrics = json.loads((out / "metrics" / f"{experiment}.json").read_text())
    weights = {str(p.relative_to(out)): torch.load(p, map_location="cpu", weights_only=True)["state_dict"]
               for p in sorted((out / "checkpoints" / experiment).rglob("last.ckpt"))}
    return without_timing(metrics), weights


def kill_mid_epoch(proc: subprocess.Popen, marker: Path) -> tuple[Path, int]:
    """Wait for the launcher's marker (a mid-epoch checkpoint plus one trained step), SIGKILL the run;
    the (training folder, checkpoint step) the marker names, checked against the checkpoint on disk."""
    deadline = time.monotonic() + TIMEOUT
    while not marker.exists():
        if proc.poll() is not None:
            pytest.fail(f"the run ended (exit {proc.returncode}) before a mid-epoch checkpoint: "
                        f"{proc.stderr.read()[-2000:]}")
        if time.monotonic() > deadline:
            pytest.fail("no mid-epoch checkpoint within the timeout")
        time.sleep(0.05)
    time.sleep(0.2)   # the marker is written just before the sleep starts
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    where, step = marker.read_text().split()
    ckpt = torch.load(Path(where) / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert ckpt["global_step"] == int(step)
    return Path(where), int(step)


@pytest.fixture(scope="module")
def killed_and_resumed(tmp_path_factory):
    """{paper: (checkpoint dir, step) of the kill, out dir} after a SIGKILL mid-epoch and a rerun to the
    end; the papers run side by side (one core each)."""
    tmp = tmp_path_factory.mktemp("kill")
    launcher = tmp / "launcher.py"
    launcher.write_text(LAUNCHER)
    outs = {paper: tmp / paper for paper in CASES}
    killed = {}
    procs = {}
    try:
        for paper, out in outs.items():
            marker = tmp / f"{paper}.marker"
            procs[paper] = (subprocess.Popen(command(paper, out, launcher), cwd=REPO,
                                             env={**ENV, "KILL_TEST_MARKER": str(marker)},
                                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True), marker)
        for paper, (proc, marker) in procs.items():
            killed[paper] = kill_mid_epoch(proc, marker)
        reruns = {paper: subprocess.Popen(command(paper, out), cwd=REPO, env=ENV, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.PIPE, text=True) for paper, out in outs.items()}
        procs = {p: (r, None) for p, r in reruns.items()}
        errors = {p: r.communicate(timeout=TIMEOUT)[1] for p, r in reruns.items()}
    finally:
        for proc, _ in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
    return {paper: (killed[paper], outs[paper], reruns[paper].returncode, errors[paper]) for paper in CASES}


@pytest.mark.parametrize("paper", sorted(CASES))
def test_sigkill_mid_epoch_then_rerun_equals_an_uninterrupted_run(paper, killed_and_resumed, smoke_every_paper):
    (where, step), out, returncode, err = killed_and_resumed[paper]
    assert returncode == 0, err[-3000:]
    assert 0 < step and step % 2 == 0          # a step checkpoint (every_n_train_steps=2), mid-epoch
    reference = smoke_every_paper[0] / "smoke" / paper   # the workflow's uninterrupted smoke run
    assert (reference / "metrics" / f"{CASES[paper][0]}.json").is_file(), f"no smoke run of {paper} to compare"
    metrics, weights = final_state(out, paper)
    ref_metrics, ref_weights = final_state(reference, paper)
    assert metrics == ref_metrics
    assert weights.keys() == ref_weights.keys() and weights
    for path, state in weights.items():
        assert state.keys() == ref_weights[path].keys()
        assert all(torch.equal(v, ref_weights[path][k]) for k, v in state.items()), path


SOLVE_LAUNCHER = '''
import os, runpy, sys, time
from pathlib import Path

import papers.p2l.solve_cache as C

marker, real, kept = Path(os.environ["KILL_TEST_MARKER"]), C.save, []


def save(key, solution):
    real(key, solution)
    kept.append(key)
    if len(kept) == 2 and key is not None:
        marker.write_text(str(C.active()))
        time.sleep(600)


C.save = save
runpy.run_module("papers.p2l", run_name="__main__", alter_sys=True)
'''


def _solve_command(out: Path, launcher: Path | None = None) -> list[str]:
    head = [sys.executable, str(launcher)] if launcher else [sys.executable, "-m", "papers.p2l"]
    return [*head, "main_sr", "--profile", "smoke", "--out", str(out)]


def test_p2l_solving_job_sigkilled_mid_job_then_rerun_equals_an_uninterrupted_run(tmp_path, smoke_every_paper):
    reference = smoke_every_paper[0] / "smoke" / "p2l"
    assert (reference / "metrics" / "main_sr.json").is_file(), "no smoke run of p2l to compare"
    out = tmp_path / "p2l"
    shutil.copytree(reference / "checkpoints", out / "checkpoints")   # the trained smoke priors and classifier
    launcher, marker = tmp_path / "launcher.py", tmp_path / "marker"
    launcher.write_text(SOLVE_LAUNCHER)
    proc = subprocess.Popen(_solve_command(out, launcher), cwd=REPO, env={**ENV, "KILL_TEST_MARKER": str(marker)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not marker.exists():
            if proc.poll() is not None:
                pytest.fail(f"the run ended (exit {proc.returncode}) before two batches: {proc.stderr.read()[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail("no second batch within the timeout")
            time.sleep(0.05)
        time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    folder = Path(marker.read_text())
    assert folder == out / "checkpoints" / "solves" / "main_sr" and len(list(folder.glob("*.pt"))) == 2
    assert not (out / "metrics" / "main_sr.json").exists()
    rerun = subprocess.run(_solve_command(out), cwd=REPO, env=ENV, capture_output=True, text=True, timeout=TIMEOUT)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert rerun.stderr.count("resumed: a solver batch read from") == 2   # the two kept batches, not solved again
    assert not folder.exists()   # removed once the job finished
    metrics = json.loads((out / "metrics" / "main_sr.json").read_text())
    expected = json.loads((reference / "metrics" / "main_sr.json").read_text())
    assert without_timing(metrics) == without_timing(expected)
