"""Resuming a solving job where it was killed: each solver batch's result kept on disk until the job ends.

At the full profile a `main_<task>` job solves for hours (the tuning points on the validation images, then
the test images, four images a batch). Inside `batch_cache(folder)` (a context around the experiment),
`problems._solve_batches` keeps each batch's `Solution` in `folder/<key>.pt`, where the key hashes everything
that batch's result depends on:

- the method, the step count, the batch's seed and every hyper-parameter (per-image values included);
- the batch's measurements, captions and initial latents;
- the prior: its folder and the size and modification time of every file in it, its device and dtype;
- the solving code (every module of this package) and torch's version.

A rerun after a kill (SIGKILL, a SLURM preemption, an out-of-memory stop) reads the batches that finished
and solves the others. Each batch's solve is deterministic given those inputs, so the rerun ends with the
result of an uninterrupted run (tests/p2l/test_p2l_solve_cache.py). The folder is removed when the
experiment returns. After an error it stays: the key changes with the code, so a batch solved before a fix
is solved again. A prior without a known folder (`LatentDiffusion.source` empty: one built in memory) is
never cached. Files are written atomically (a temporary name, then a rename) and read with
`weights_only=True`.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import sys
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path

import torch

_FOLDER: ContextVar[Path | None] = ContextVar("p2l_solve_cache", default=None)


@contextmanager
def batch_cache(folder: str | Path):
    """Keep every solver batch of the enclosed code under `folder`; remove the folder on a normal exit."""
    folder = Path(folder)
    token = _FOLDER.set(folder)
    try:
        yield folder
    finally:
        _FOLDER.reset(token)
    shutil.rmtree(folder, ignore_errors=True)   # reached only when the enclosed code returned
    try:
        folder.parent.rmdir()   # `solves/`, once no other job keeps batches there
    except OSError:
        pass


def resumable(experiment):
    """`experiment(run)` inside `batch_cache(<out>/checkpoints/solves/<experiment name>)`."""
    def run_resumable(run):
        with batch_cache(Path(run.out) / "checkpoints" / "solves" / run.experiment):
            return experiment(run)

    run_resumable.__dict__.update(getattr(experiment, "__dict__", {}))   # `needs`, `per_seed`
    return run_resumable


def active() -> Path | None:
    return _FOLDER.get()


@lru_cache(maxsize=1)
def code_digest() -> str:
    """sha256 of this package's modules and torch's version."""
    h = hashlib.sha256(torch.__version__.encode())
    root = Path(__file__).resolve().parent
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def prior_identity(ldm) -> str | None:
    """The prior's folder with its files' sizes and modification times, device and dtype; None where
    the prior was not loaded from a folder."""
    source = getattr(ldm, "source", "")
    if not source:
        return None
    root = Path(source)
    files = sorted(p for p in root.rglob("*") if p.is_file())
    stats = [(str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns) for p in files]
    return repr((str(root.resolve()), stats, str(ldm.device), str(ldm.dtype)))


def _update(h, value) -> None:
    if torch.is_tensor(value):
        t = value.detach().cpu().contiguous()
        h.update(repr((str(t.dtype), tuple(t.shape))).encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    else:
        h.update(repr(value).encode())


def batch_key(method: str, y: torch.Tensor, ldm, *, steps: int, seed: int, captions, hparams: dict) -> str | None:
    """The cache key of one solver batch (module docstring); None where the prior has no identity."""
    identity = prior_identity(ldm)
    if identity is None:
        return None
    h = hashlib.sha256(code_digest().encode())
    for part in (identity, method, int(steps), int(seed), None if captions is None else list(captions), y):
        _update(h, part)
    for k in sorted(hparams):
        _update(h, k)
        _update(h, hparams[k])
    return h.hexdigest()


def load(key: str | None):
    """The Solution cached under `key` in the active folder, or None."""
    folder = active()
    if folder is None or key is None or not (folder / f"{key}.pt").is_file():
        return None
    from .solver import Solution

    print(f"resumed: a solver batch read from {folder / f'{key}.pt'}", file=sys.stderr, flush=True)
    return Solution(**torch.load(folder / f"{key}.pt", map_location="cpu", weights_only=True))


def save(key: str | None, solution) -> None:
    """Write `solution` under `key` in the active folder (nothing where no folder is active)."""
    folder = active()
    if folder is None or key is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{key}.{os.getpid()}.tmp"
    torch.save(asdict(solution), tmp)
    os.replace(tmp, folder / f"{key}.pt")
