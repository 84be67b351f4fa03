"""The kernels' own tests run the Triton kernels (the interpreter on a CPU machine), never only the torch
references that the papers' tests run (tests/conftest.py)."""
import os

import pytest
import torch

from kernels.dispatch import backend


def test_a_kernel_test_runs_the_kernel():
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("a CUDA machine: the kernels compile")
    assert backend(torch.zeros(1)) == "interpreter"
