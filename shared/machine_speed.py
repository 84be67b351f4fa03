"""The machine-speed probe: the CPU seconds of one fixed single-thread workload shaped like the tiny
jobs (training steps of a small conv net and an MLP, matmul and convolution kernels, autograd), so that
CPU seconds measured on two machines can be compared, and time limits follow the machine.

    python -m shared.machine_speed          # prints the probe's CPU-s on this machine

`REFERENCE_S` is the probe on the machine the suite's time limits were sized on (a 2-core AMD EPYC with
AVX2, the kernels pinned as at smoke and tiny); `slowdown()` is this machine's probe over it, at least 1,
and a slow test's limit is its reference limit times that. The probe runs in-process: torch's threads and
the pinned instruction set (shared/cpu_isa.py) are the caller's, as they are for the work it stands for.
"""
from __future__ import annotations

import time

REFERENCE_S = 1.7
STEPS = 100
ROUNDS = 3


def _workload() -> None:
    import torch

    g = torch.Generator().manual_seed(0)
    conv = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.SiLU(),
                               torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.SiLU(),
                               torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10))
    mlp = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.GELU(), torch.nn.LayerNorm(256), torch.nn.Linear(256, 10))
    opt = torch.optim.Adam([*conv.parameters(), *mlp.parameters()], lr=1e-3)
    images, vectors = torch.randn(16, 3, 32, 32, generator=g), torch.randn(256, 256, generator=g)
    labels = torch.randint(0, 10, (16,), generator=g)
    for _ in range(STEPS):
        loss = torch.nn.functional.cross_entropy(conv(images), labels) + mlp(vectors).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def least_cpu_s(call, rounds: int = ROUNDS) -> float:
    """The least CPU seconds of this process over `rounds` calls of `call`, after one warm-up call (the
    least is the least disturbed by other work on the machine)."""
    call()
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        call()
        best = min(best, time.process_time() - start)
    return best


def probe_cpu_s(rounds: int = ROUNDS) -> float:
    """The machine-speed probe: the least CPU seconds of the workload over `rounds` runs."""
    return least_cpu_s(_workload, rounds)


def slowdown(probe_s: float | None = None) -> float:
    """How many times slower than the reference machine this one runs the probe (at least 1)."""
    return max(1.0, (probe_cpu_s() if probe_s is None else probe_s) / REFERENCE_S)


if __name__ == "__main__":
    print(f"{probe_cpu_s():.3f}")
