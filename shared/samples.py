"""Stochastic metrics as samples: one value per unit (seed, fold or image), never a bare mean.

A sample is written to a metrics file as::

    {"values": [v_0, ..., v_{k-1}], "unit": "seed", "mean": m, "std": s, "n": k}

The index is the unit: `values[i]` belongs to seed i (fold i, image i), so two samples with the same
unit and n pair by index. `std` uses ddof=1 (null for n = 1). A deterministic quantity (an analytic
FLOP count, a parameter count, a compression ratio) is written as a plain number instead.

A sample of 0/1 outcomes (a hit per image) may be written with `binary=True`: it carries
`"binary": true`, and the ledger decides it alone by the exact (Clopper–Pearson) interval of its
proportion, which stays honest when every unit is a hit.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

UNITS = ("seed", "fold", "image")


def sample(values: Iterable[float], unit: str, binary: bool = False) -> dict:
    """The metrics-file form of a stochastic metric with one value per `unit` (`binary`: 0/1 outcomes)."""
    if unit not in UNITS:
        raise ValueError(f"unit {unit!r} is not one of {UNITS}")
    vals = [float(v) for v in np.asarray(list(values), dtype=float).ravel()]
    if not vals:
        raise ValueError("a sample needs at least one value")
    n = len(vals)
    arr = np.asarray(vals)
    std = float(arr.std(ddof=1)) if n > 1 else None
    out = {"values": vals, "unit": unit, "mean": float(arr.mean()), "std": std, "n": n}
    if binary:
        if not set(vals) <= {0.0, 1.0}:
            raise ValueError("a binary sample holds only 0/1 outcomes")
        out["binary"] = True
    return out


def is_binary(obj: Any) -> bool:
    """True for a sample of 0/1 outcomes written with `sample(..., binary=True)`."""
    return is_sample(obj) and bool(obj.get("binary")) and set(obj["values"]) <= {0.0, 1.0}


def is_sample(obj: Any) -> bool:
    """True for a dict written by `sample` (it has per-unit `values` and a `unit`)."""
    return isinstance(obj, Mapping) and "values" in obj and "unit" in obj


def combine(samples: Iterable[Mapping], fn) -> dict:
    """A sample from unit-wise `fn(*values_i)` of samples with one unit and n, e.g. a paired gap."""
    samples = list(samples)
    units = {s["unit"] for s in samples}
    ns = {len(s["values"]) for s in samples}
    if len(units) != 1 or len(ns) != 1:
        raise ValueError(f"samples differ in unit or n: {[(s['unit'], len(s['values'])) for s in samples]}")
    values = [fn(*vs) for vs in zip(*(s["values"] for s in samples))]
    return sample(values, units.pop())

