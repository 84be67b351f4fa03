"""Test-wide settings: one torch thread, the Triton interpreter, offline hubs, no wandb.

TRITON_INTERPRET must be set before any `@triton.jit` decorator runs, hence here, at import time.
"""
import os

os.environ["TRITON_INTERPRET"] = "1"
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("MPLBACKEND", "Agg")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[1]
FIXTURE_PAPERS = REPO / "tests" / "fixtures" / "papers"


@pytest.fixture
def repo() -> Path:
    return REPO
