"""Which implementation a kernel call runs.

- Triton on CUDA tensors (when triton imports);
- the Triton interpreter on CPU tensors when `TRITON_INTERPRET=1` (set before triton is imported);
- the pure-torch reference otherwise, or always when `KERNELS_FORCE_REFERENCE=1`.
"""
from __future__ import annotations

import os

import torch


def triton_available() -> bool:
    try:
        import triton  # noqa: F401
    except Exception:  # noqa: BLE001 - any import failure means "no triton"
        return False
    return True


def backend(*tensors: torch.Tensor) -> str:
    """'triton', 'interpreter' or 'reference' for a call on `tensors`."""
    if os.environ.get("KERNELS_FORCE_REFERENCE") == "1" or not triton_available():
        return "reference"
    devices = {t.device.type for t in tensors}
    if devices == {"cuda"}:
        return "triton"
    if devices == {"cpu"} and os.environ.get("TRITON_INTERPRET") == "1":
        return "interpreter"
    return "reference"


def next_pow2(n: int, minimum: int = 16) -> int:
    """Block sizes: powers of two, at least 16 so that `tl.dot` compiles on GPUs (TOOLCHAIN)."""
    return max(minimum, 1 << (int(n) - 1).bit_length())
