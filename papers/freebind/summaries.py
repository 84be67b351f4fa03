"""What every FreeBind summary experiment reads and prints: the seed jobs' results, a per-seed sample
as `mean [90% interval]`, and the interval the ledger decides on."""
from __future__ import annotations

import numpy as np

from shared.io import read_json

N_SEED_JOBS = 8   # the most bonds_s<i> jobs a profile's `seeds` can fill (rules.smk reads it)


def seed_results(run) -> list[dict]:
    """The bonds_s<i> results that ran, in `seeds` order."""
    out = []
    for i in range(N_SEED_JOBS):
        data = read_json(run.out / "metrics" / f"bonds_s{i}.json")
        if not data.get("skipped"):
            out.append(data)
    if not out:
        raise RuntimeError("no bonds_s<i> metrics found: run the bonds_s0 experiment first")
    return out


def fmt(s: dict | None, digits: int = 1) -> str:
    """A per-seed sample as `mean [lo, hi]`, the 90% interval of the mean the ledger decides on (the
    mean alone under 3 seeds)."""
    if s is None:
        return "–"
    iv = interval_cols(s)
    if iv["90% lo"] is None:
        return f"{s['mean']:.{digits}f}"
    return f"{s['mean']:.{digits}f} [{iv['90% lo']:.{digits}f}, {iv['90% hi']:.{digits}f}]"


def interval_cols(s: dict | None) -> dict:
    """The 90% interval of a sample's mean, as the ledger computes it (`shared.intervals`)."""
    from shared.claims import MIN_UNITS
    from shared.intervals import mean_interval

    if s is None or s["n"] < MIN_UNITS or not all(np.isfinite(s["values"])):
        return {"90% lo": None, "90% hi": None}
    lo, hi, _ = mean_interval(s["values"])
    return {"90% lo": lo, "90% hi": hi}
