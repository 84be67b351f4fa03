"""One instruction set for the CPU kernels of smoke and tiny runs and of the tests: the same commit runs
the same kernels on an AVX-512 Xeon and on an AVX2 EPYC.

Three libraries under torch choose their kernels from the CPU they run on, and kernels for other
instruction sets sum in other orders and round differently; training and the solvers' steps amplify the
last bits into other weights and other images. Each has its own switch, read once per process:

- `ATEN_CPU_CAPABILITY` (PyTorch's vectorised elementwise and reduction kernels, read on first dispatch);
- `ONEDNN_MAX_CPU_ISA` (oneDNN, which runs torch's CPU convolutions);
- `MKL_CBWR` (MKL's conditional numerical reproducibility, which runs torch's matmuls). Its `AVX2` branch
  is Intel's only: on another vendor's CPU MKL's documentation says it falls back to its automatic
  branch, so the cross-vendor branch `COMPATIBLE` is the one pinned (slower matmuls: benchmarks/cpu_isa.json
  gives the cost on one job).

`PINNED` is set in the environment a process starts with: the Snakefile does so for its own process at
smoke and tiny, so every job, notebook and warm-start server it runs inherits it, and tests/conftest.py
does before torch is imported; an experiment run by hand at smoke or tiny starts again with it
(`shared.experiment.cli`). A value already in the environment wins, so one run can ask for another
(`ATEN_CPU_CAPABILITY=default make test`), and `REPRO_CPU_ISA=free` leaves them all unset. A real full-profile run is left free: its GPUs decide its numbers.
This module imports nothing heavy (the test suite reads it before torch).
"""
from __future__ import annotations

import os
from typing import Mapping, MutableMapping

PINNED = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "COMPATIBLE"}
PINNED_PROFILES = ("smoke", "tiny")
# REPRO_CPU_ISA=free leaves every library to pick its kernels from the CPU (to measure what the pin costs)
OPT_OUT = "REPRO_CPU_ISA"


def pin(environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """Put the pinned settings into `environ` where it has none (none at all under REPRO_CPU_ISA=free);
    returns the settings in effect."""
    if not is_free(environ):
        for key, value in PINNED.items():
            environ.setdefault(key, value)
    return in_effect(environ)


def needs_pin(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether `pin` would add a setting: a process started so must start again to obey it."""
    return not is_free(environ) and any(key not in environ for key in PINNED)


def is_free(environ: Mapping[str, str] = os.environ) -> bool:
    return environ.get(OPT_OUT) == "free"


def in_effect(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """{switch: its value in `environ`, or 'free' where unset} (provenance and records carry this)."""
    return {key: environ.get(key, "free") for key in PINNED}


def is_pinned(environ: Mapping[str, str] = os.environ) -> bool:
    return all(environ.get(key) == value for key, value in PINNED.items())
