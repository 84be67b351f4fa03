"""Parameters, forward FLOPs and latency of the E²GAN generator against pix2pix."""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from .setup import Setup

def synchronize(device: torch.device) -> None:
    """Wait for queued kernels on a CUDA device (a no-op elsewhere), so a clock read after it is honest."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def forward_seconds(G, x, tokens, mask, repeats: int) -> list[float]:
    """Wall seconds of `repeats` forwards of G, each bracketed by a device synchronize."""
    import time

    device = x.device
    times = []
    with torch.no_grad():
        for _ in range(repeats):
            synchronize(device)
            t0 = time.perf_counter()
            G(x, tokens, mask)
            synchronize(device)
            times.append(time.perf_counter() - t0)
    return times


def latency_table(run) -> dict:
    """Parameters, forward FLOPs and latency (batch 1, on `cfg.device`) of the E²GAN generator vs pix2pix.

    Every tensor the generators see (input, text tokens, mask) is on the model's device, and on CUDA
    the clock is read only after `torch.cuda.synchronize()`."""
    from torch.utils.flop_counter import FlopCounterMode

    setup, cfg = Setup(run), run.cfg
    tokens, mask = setup.encoder.encode(["sepia"])
    tokens, mask = tokens.to(setup.device), mask.to(setup.device)
    rows, metrics = [], {}
    for res in cfg.latency.resolutions:
        x = torch.zeros(1, 3, res, res, device=setup.device)
        for name, G in (("e2gan", setup.e2gan()), ("pix2pix", setup.pix2pix())):
            G.eval()
            with torch.no_grad(), FlopCounterMode(display=False) as fc:
                G(x, tokens, mask)
            times = forward_seconds(G, x, tokens, mask, cfg.latency.repeats)
            params = sum(p.numel() for p in G.parameters())
            rows.append({"model": name, "resolution": res, "params": params, "gflops": fc.get_total_flops() / 1e9,
                         "latency_ms_median": 1000 * float(np.median(times))})
            metrics[f"{name}_{res}"] = {"params": params, "flops": int(fc.get_total_flops())}
    run.save_table(pd.DataFrame(rows), "e2gan_latency")
    return metrics


