"""MMP's main training (MMP-Trans on every fold, `cindex_mmp_trans`) survives a SIGKILL: the experiment
runs as a subprocess at smoke with a checkpoint every few steps, is killed mid-epoch right after a
checkpoint, and rerun; its metrics, training curves and final weights equal an uninterrupted run's."""
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch

from conftest import REPO, WORKFLOW_ENV

EXPERIMENT = "cindex_mmp_trans"
# fold 0 of the smoke cohort has 24 training patients: 6 steps an epoch at batch 4, 60 steps in all
SETTINGS = ["trainer.every_n_train_steps=4", "train.batch_size=4", "train.epochs=10"]
STEPS_PER_EPOCH, TOTAL = 6, 60
TIMEOUT = 240


def run_inline(out, monkeypatch):
    """The experiment in this process (as the CLI runs it); returns the checkpoints `fit` resumed from."""
    import shared.training
    from papers.mmp.experiments import EXPERIMENTS
    from shared.experiment import run_experiment

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)   # as the workflow (and the killed run) computes the tokens
    resumed, fit = [], shared.training.fit
    monkeypatch.setattr(shared.training, "fit", lambda *a, **k: resumed.append(fit(*a, **k)) or resumed[-1])
    run_experiment("mmp", EXPERIMENTS[EXPERIMENT], EXPERIMENT, REPO / "papers/mmp/config.yaml", "smoke", out,
                   overrides=SETTINGS)
    return resumed


def checkpoint_step(path):
    """global_step of a readable checkpoint, None while it is missing or half written."""
    try:
        return int(torch.load(path, map_location="cpu", weights_only=True)["global_step"])
    except Exception:  # noqa: BLE001 - not there yet, or being written
        return None


def kill_mid_epoch(out) -> int:
    """Start the experiment, freeze it (SIGSTOP) whenever fold 0's checkpoint changes, and SIGKILL it
    at the first mid-epoch checkpoint; returns that checkpoint's step."""
    ckpt = out / "checkpoints" / EXPERIMENT / "fold0" / "checkpoints" / "last.ckpt"
    cmd = [sys.executable, "-m", "papers.mmp", EXPERIMENT, "--profile", "smoke", "--out", str(out),
           *[a for s in SETTINGS for a in ("--set", s)]]
    proc = subprocess.Popen(cmd, cwd=REPO, env=WORKFLOW_ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    start, seen = time.monotonic(), None
    try:
        while time.monotonic() - start < TIMEOUT:
            if proc.poll() is not None:
                pytest.fail(f"the run ended (exit {proc.returncode}) before a mid-epoch checkpoint: "
                            f"{proc.stderr.read().decode()[-2000:]}")
            stamp = ckpt.stat().st_mtime_ns if ckpt.exists() else None
            if stamp is not None and stamp != seen:
                os.kill(proc.pid, signal.SIGSTOP)
                step = checkpoint_step(ckpt)
                if step is not None and step % STEPS_PER_EPOCH and step < TOTAL:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait(10)
                    return step
                seen = stamp if step is not None else None
                os.kill(proc.pid, signal.SIGCONT)
            time.sleep(0.005)
        pytest.fail(f"no mid-epoch checkpoint of fold 0 within {TIMEOUT} s")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def weights(out, fold):
    return torch.load(out / "checkpoints" / EXPERIMENT / f"fold{fold}" / "checkpoints" / "last.ckpt",
                      map_location="cpu", weights_only=True)["state_dict"]


def test_main_training_resumes_after_sigkill_mid_epoch(tmp_path, monkeypatch):
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    assert run_inline(whole, monkeypatch) == [None, None]
    step = kill_mid_epoch(killed)
    print(f"killed at step {step} of {TOTAL} (epoch {step // STEPS_PER_EPOCH}, batch {step % STEPS_PER_EPOCH})")
    assert 0 < step < TOTAL and step % STEPS_PER_EPOCH
    assert not (killed / "metrics" / f"{EXPERIMENT}.json").exists()
    resumed = run_inline(killed, monkeypatch)
    assert resumed[0] is not None and resumed[1] is None   # fold 0 resumed from the checkpoint, fold 1 fresh
    assert (killed / "metrics" / f"{EXPERIMENT}.json").read_text() == (whole / "metrics" / f"{EXPERIMENT}.json").read_text()
    assert (killed / "logs" / f"{EXPERIMENT}.csv").read_text() == (whole / "logs" / f"{EXPERIMENT}.csv").read_text()
    for fold in (0, 1):
        a, b = weights(whole, fold), weights(killed, fold)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    shutil.rmtree(tmp_path)
