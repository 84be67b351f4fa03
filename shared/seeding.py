"""Seeding and determinism: the same seed and profile give the same numbers."""
from __future__ import annotations

import os
import random
import sys

import numpy as np
import torch


def set_threads(n: int = 1) -> None:
    """Tiny models on 2 shared cores run fastest with one intra-op thread per process."""
    os.environ.setdefault("OMP_NUM_THREADS", str(n))
    torch.set_num_threads(n)


def seed_everything(seed: int, deterministic: bool = True) -> torch.Generator:
    """Seed python, numpy and torch (all devices); turn on deterministic algorithms.

    Returns a torch.Generator seeded with `seed`, for code that wants its own stream.
    """
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        if "torch._inductor" in sys.modules or torch.cuda.is_available():
            torch.use_deterministic_algorithms(True, warn_only=True)
        else:
            # the same eager flag without importing torch._inductor (1.4 s per process on CPU), whose
            # `deterministic` setting only torch.compile reads; nothing here compiles
            torch._C._set_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False
    return torch.Generator().manual_seed(seed)


def derive_seed(seed: int, *parts: object) -> int:
    """A child seed for (seed, parts...), stable across runs and platforms (e.g. one per fold)."""
    import hashlib

    blob = repr((seed,) + tuple(parts)).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:4], "little")
