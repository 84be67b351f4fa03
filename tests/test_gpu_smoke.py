"""`make gpu-smoke` without a GPU: one line and exit 2."""
import subprocess
import sys

import pytest
import torch

from conftest import REPO, WORKFLOW_ENV


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_gpu_smoke_stops_with_one_line_without_cuda():
    run = subprocess.run([sys.executable, "tools/gpu_smoke.py"], cwd=REPO, env=WORKFLOW_ENV,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr[-2000:]
    assert len(run.stdout.strip().splitlines()) == 1 and "no CUDA" in run.stdout


def test_probe_rows_on_cpu_at_small_shapes(tmp_path):
    """The smoke's per-paper loop and CSV, on the CPU at the smoke profile's shapes (the GPU run: full, cuda)."""
    import csv
    sys.path.insert(0, str(REPO / "tools"))
    import gpu_smoke

    info = {"gpu": "cpu", "driver": "-", "torch": torch.__version__, "cuda": "-", "triton": "-"}
    rows = gpu_smoke.probe_papers(["everest", "freebind", "mmp"], tmp_path, info, device="cpu", profile="smoke",
                                   warmup=0, reps=1)
    assert [r["paper"] for r in rows] == ["everest:pretrain", "everest:finetune", "freebind", "mmp"]
    assert all(r["status"] == "ok" and r["s_per_step"] > 0 for r in rows), rows
    with (tmp_path / "probe_steps.csv").open() as f:
        assert len(list(csv.DictReader(f))) == 4
