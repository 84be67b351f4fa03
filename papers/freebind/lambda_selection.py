"""λ chosen on validation events, with one budget per arm.

Every arm tuned this way scores each point of the same grid once on the validation events (never the
test events). So a bond and the late fusion it is compared with get the same number of validation
evaluations. For each column the arm keeps the λ with the best validation value (on a tie, the first
in grid order) and reports its test value at that λ:

    λ*_c = argmax_{λ ∈ grid} metric_c(arm(val, λ)),    reported: metric_c(arm(test, λ*_c)).
"""
from __future__ import annotations

from itertools import product
from typing import Callable, Mapping, Sequence

Row = Mapping[str, float | None]


def grid(*axes: Sequence[float]) -> list[tuple[float, ...]]:
    """Every combination of the axes' values, in order (the first axis slowest)."""
    return [tuple(float(v) for v in p) for p in product(*axes)]


def select_on_validation(val_row: Callable[[tuple], Row], test_row: Callable[[tuple], Row],
                         points: Sequence[tuple]) -> dict:
    """`val_row(λ)` / `test_row(λ)`: the arm's evaluated row on the validation / test events at λ.

    Returns {"row": test value per column at its own λ*, "chosen": λ* per column, "evaluations": the
    number of validation evaluations (len(points))}."""
    val = [val_row(p) for p in points]
    chosen: dict[str, tuple] = {}
    for col in val[0]:
        scored = [(v[col], i) for i, v in enumerate(val) if v[col] is not None]
        if scored:
            best = max(s for s, _ in scored)
            chosen[col] = points[next(i for s, i in scored if s == best)]
    test_at = {p: test_row(p) for p in dict.fromkeys(chosen.values())}
    row = {col: (test_at[chosen[col]][col] if col in chosen else None) for col in val[0]}
    return {"row": row, "chosen": {c: list(p) for c, p in chosen.items()}, "evaluations": len(points)}
