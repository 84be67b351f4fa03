"""Which kernel implementation the tests run on a CPU machine (tests/conftest.py): the papers' tests run the
torch references, as the workflow's CPU jobs do; the kernels' own tests and a test marked `interpreter`
run the Triton interpreter (on a CUDA machine nothing is forced)."""
import os

import pytest
import torch

from kernels.dispatch import backend

needs_interpreter = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                                       reason="a CUDA machine: the tests compile the kernels")


@needs_interpreter
def test_a_papers_test_runs_the_kernels_reference():
    assert backend(torch.zeros(1)) == "reference"


@needs_interpreter
@pytest.mark.interpreter
def test_a_test_marked_interpreter_runs_the_interpreter():
    assert backend(torch.zeros(1)) == "interpreter"
