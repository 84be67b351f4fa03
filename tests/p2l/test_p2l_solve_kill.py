"""A solving job that is SIGKILLed resumes per solver batch: `main_sr` at smoke, killed after it has cached
two batches, is rerun to the end and must write the metrics of the workflow's uninterrupted smoke run.

The killed run goes through a launcher that wraps `solve_cache.save`: after the second batch is kept it
writes a marker file and sleeps, so the test kills a process that is mid-job. Every subprocess has a
timeout, so the test cannot hang."""
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

REPO = Path(__file__).resolve().parents[2]
ENV = {**{k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"},
       "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled", "CI": "true"}
TIMEOUT = 240
TIMING_KEYS = ("wall_s", "runtime_ratio_to_ldps")

LAUNCHER = '''
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


def _command(out: Path, launcher: Path | None = None) -> list[str]:
    head = [sys.executable, str(launcher)] if launcher else [sys.executable, "-m", "papers.p2l"]
    return [*head, "main_sr", "--profile", "smoke", "--out", str(out)]


def _without_timing(value):
    if isinstance(value, dict):
        return {k: _without_timing(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [_without_timing(v) for v in value]
    return value


def test_sigkill_mid_job_then_rerun_equals_an_uninterrupted_run(tmp_path, smoke_every_paper):
    reference = smoke_every_paper[0] / "smoke" / "p2l"
    assert (reference / "metrics" / "main_sr.json").is_file(), "no smoke run of p2l to compare"
    out = tmp_path / "p2l"
    shutil.copytree(reference / "checkpoints", out / "checkpoints")   # the trained smoke priors and classifier
    launcher, marker = tmp_path / "launcher.py", tmp_path / "marker"
    launcher.write_text(LAUNCHER)
    proc = subprocess.Popen(_command(out, launcher), cwd=REPO, env={**ENV, "KILL_TEST_MARKER": str(marker)},
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
    rerun = subprocess.run(_command(out), cwd=REPO, env=ENV, capture_output=True, text=True, timeout=TIMEOUT)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert rerun.stderr.count("resumed: a solver batch read from") == 2   # the two kept batches, not solved again
    assert not folder.exists()   # removed once the job finished
    metrics = json.loads((out / "metrics" / "main_sr.json").read_text())
    expected = json.loads((reference / "metrics" / "main_sr.json").read_text())
    assert _without_timing(metrics) == _without_timing(expected)
