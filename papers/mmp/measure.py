"""Measuring a forward pass: peak bytes of live tensors (`PeakMemory`), best wall time (`measure`),
and the log-log slope of a cost against N."""
from __future__ import annotations

import time as clock

import numpy as np
import torch


class PeakMemory(torch.utils._python_dispatch.TorchDispatchMode):
    """Peak bytes of live tensors created inside the block (CPU or GPU), tracked per storage."""

    def __init__(self):
        super().__init__()
        self.live = self.peak = 0
        self.refs = {}

    def _release(self, key):
        self.refs[key][0] -= 1
        if self.refs[key][0] == 0:
            self.live -= self.refs.pop(key)[1]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        import weakref

        out = func(*args, **(kwargs or {}))
        flat = out if isinstance(out, (tuple, list)) else [out]
        for t in flat:
            if isinstance(t, torch.Tensor):
                storage = t.untyped_storage()
                key = storage.data_ptr()
                if key not in self.refs:
                    self.refs[key] = [0, storage.nbytes()]
                    self.live += storage.nbytes()
                    self.peak = max(self.peak, self.live)
                self.refs[key][0] += 1
                weakref.finalize(t, self._release, key)
        return out


def measure(fn, repeats: int, memory: bool = True, min_time: float = 0.0) -> tuple[float, int]:
    """(best wall time in s, peak activation bytes or 0) of `fn()` under no_grad: one warm-up
    call, then at least `repeats` timed calls and more until they add up to `min_time` seconds
    (as `timeit`'s autorange does), so that sub-millisecond calls get enough repeats for their
    minimum to resist a busy machine."""
    with torch.no_grad():
        peak = 0
        if memory:
            with PeakMemory() as mem:
                fn()
            peak = mem.peak
        else:
            fn()                            # warm-up, as the memory pass is one
        times = []
        while len(times) < repeats or sum(times) < min_time:
            t0 = clock.perf_counter()
            fn()
            times.append(clock.perf_counter() - t0)
    return min(times), peak


def loglog_slope(n, y) -> float:
    """Least-squares slope of log y against log n: y ∝ n^slope."""
    return float(np.polyfit(np.log(np.asarray(n, float)), np.log(np.asarray(y, float)), 1)[0])
