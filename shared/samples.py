"""Stochastic metrics as samples: one value per unit (seed, fold or image), never a bare mean.

A sample is written to a metrics file as::

    {"values": [v_0, ..., v_{k-1}], "unit": "seed", "mean": m, "std": s, "n": k}

The index is the unit: `values[i]` belongs to seed i (fold i, image i), so two samples with the same
unit and n pair by index. `std` uses ddof=1 (null for n = 1). A deterministic quantity (an analytic
FLOP count, a parameter count, a compression ratio) is written as a plain number instead.

The other forms the ledger reads (`shared.claims`):
- **grouped** (`groups=`, `group_unit=`): each value also names the trained component it rests on
  (the prior, base or cohort of that image, seed or fold). The ledger's effective n is the number of
  groups, and pairing matches (group, unit within the group).
- **folds** (unit `fold`, optional `test_train_ratio`): cross-validation folds share training data;
  the ledger widens their interval by the corrected resampled t (Nadeau & Bengio, 2003).
- **binary** (`binary=True`): 0/1 outcomes, decided alone by the exact Clopper–Pearson interval.
- **count** (`count(successes, trials)`): "k of n trials", decided by the same exact interval; with
  `per_group` (trials that share a trained component) on the components' shares of successes.
- **gap** (`gap(a, b)`): the paired difference a − b; the audit checks a constant test on it for
  swap-invariance, as it does a `ref:` comparison.
- **knob** (`knob(name, points, samples)`): one sample per point of a world knob, paired by unit
  across points; claims on it test a trend or the range where a point test holds.

Computed from configuration alone (FLOP, byte or call counts of configured shapes): a metrics node
holding `"from_config": true` (all its leaves) or `"from_config": [child keys]` says so, and the
audit refuses a `paper` claim on such a value (`configured`).
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np

UNITS = ("seed", "fold", "image", "trial")


def sample(values: Iterable[float], unit: str, binary: bool = False, groups: Sequence | None = None,
           group_unit: str | None = None, test_train_ratio: float | None = None) -> dict:
    """The metrics-file form of a stochastic metric with one value per `unit` (`binary`: 0/1 outcomes;
    `groups`: the trained component each value rests on, named by `group_unit`; `test_train_ratio`:
    test over training size of each fold, for unit `fold`)."""
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
    if groups is not None:
        groups = [g if isinstance(g, str) else int(g) for g in groups]
        if len(groups) != n:
            raise ValueError(f"groups has {len(groups)} labels for {n} values")
        if not group_unit:
            raise ValueError("a grouped sample names its group_unit (prior, base, cohort)")
        out["groups"], out["group_unit"] = groups, group_unit
    if test_train_ratio is not None:
        if unit != "fold":
            raise ValueError("test_train_ratio belongs to a sample of folds")
        out["test_train_ratio"] = float(test_train_ratio)
    return out


def count(successes: int, trials: int, unit: str = "trial", per_group: Mapping | None = None,
          group_unit: str | None = None) -> dict:
    """"k of n trials" (e.g. runs that reach a target): decided by the exact Clopper–Pearson interval.
    `per_group` ({component: (k_i, n_i)}, named by `group_unit`): the trials rest on shared trained
    components, and the ledger decides on each component's share of successes instead."""
    k, n = int(successes), int(trials)
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"a count needs 0 <= successes <= trials and trials >= 1, got {k} of {n}")
    out = {"successes": k, "trials": n, "unit": unit, "mean": k / n}
    if per_group is not None:
        groups = [[g if isinstance(g, str) else int(g), int(kg), int(ng)] for g, (kg, ng) in per_group.items()]
        if not group_unit or sum(g[1] for g in groups) != k or sum(g[2] for g in groups) != n:
            raise ValueError(f"per_group must sum to {k} of {n} and name its group_unit (prior, base, cohort)")
        out["groups"], out["group_unit"] = groups, group_unit
    return out


def gap(a: Mapping, b: Mapping) -> dict:
    """The unit-wise paired difference a − b (groups kept), marked as a gap for the audit."""
    out = combine([a, b], lambda x, y: x - y)
    out["gap"] = True
    return out


def knob(name: str, points: Sequence[float], samples: Sequence[Mapping]) -> dict:
    """A sweep along the world knob `name`: `samples[j]` holds the replicates at `points[j]`, paired by
    unit across points (replicate i is the same seed at every point)."""
    points = [float(p) for p in points]
    samples = [dict(s) for s in samples]
    if len(points) != len(samples) or len(points) < 2:
        raise ValueError(f"a knob needs >= 2 points and one sample per point, got {len(points)} / {len(samples)}")
    if sorted(points) != points or len(set(points)) != len(points):
        raise ValueError(f"knob points must increase: {points}")
    if not all(is_sample(s) for s in samples) or len({(s["unit"], len(s["values"])) for s in samples}) != 1:
        raise ValueError("every knob point holds a sample with the same unit and n")
    return {"knob": name, "points": points, "samples": samples,
            "mean": [s["mean"] for s in samples], "unit": samples[0]["unit"]}


def is_binary(obj: Any) -> bool:
    """True for a sample of 0/1 outcomes written with `sample(..., binary=True)`."""
    return is_sample(obj) and bool(obj.get("binary")) and set(obj["values"]) <= {0.0, 1.0}


def is_sample(obj: Any) -> bool:
    """True for a dict written by `sample` (it has per-unit `values` and a `unit`)."""
    return isinstance(obj, Mapping) and "values" in obj and "unit" in obj


def is_count(obj: Any) -> bool:
    """True for a dict written by `count`."""
    return isinstance(obj, Mapping) and "successes" in obj and "trials" in obj


def is_knob(obj: Any) -> bool:
    """True for a dict written by `knob`."""
    return isinstance(obj, Mapping) and "knob" in obj and "points" in obj and "samples" in obj


def is_gap(obj: Any) -> bool:
    """True for a paired gap written by `gap`."""
    return is_sample(obj) and bool(obj.get("gap"))


def combine(samples: Iterable[Mapping], fn) -> dict:
    """A sample from unit-wise `fn(*values_i)` of samples with one unit and n, e.g. a paired gap
    (groups, when every sample carries the same ones, are kept)."""
    samples = list(samples)
    units = {s["unit"] for s in samples}
    ns = {len(s["values"]) for s in samples}
    if len(units) != 1 or len(ns) != 1:
        raise ValueError(f"samples differ in unit or n: {[(s['unit'], len(s['values'])) for s in samples]}")
    groupings = {(tuple(s["groups"]), s["group_unit"]) if "groups" in s else None for s in samples}
    if len(groupings) != 1:
        raise ValueError("samples differ in their groups: pair them by (group, unit) first")
    values = [fn(*vs) for vs in zip(*(s["values"] for s in samples))]
    grouping = groupings.pop()
    ratio = {s.get("test_train_ratio") for s in samples} - {None}
    return sample(values, units.pop(), groups=None if grouping is None else list(grouping[0]),
                  group_unit=None if grouping is None else grouping[1],
                  test_train_ratio=ratio.pop() if len(ratio) == 1 else None)
