"""Progress for long loops outside Lightning (solves, evaluations, feature extraction): a tqdm bar
when the run is long enough to need one, nothing in CI logs."""
from __future__ import annotations

import os
from typing import Iterable, TypeVar

T = TypeVar("T")


def progress(items: Iterable[T], desc: str, total: int | None = None, full_only: bool = True) -> Iterable[T]:
    """`items` with a tqdm bar on stderr (one line, refreshed at most every 30 s when stderr is not a
    terminal, e.g. a SLURM log); plain `items` under CI=true, and below the full profile when
    `full_only` (tiny runs take minutes, and their logs stay readable)."""
    from .loggers import run_profile

    if os.environ.get("CI") == "true" or (full_only and run_profile() != "full"):
        return items
    import sys

    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, total=total, mininterval=0.5 if sys.stderr.isatty() else 30, dynamic_ncols=True)
