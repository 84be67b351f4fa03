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


def device_name(device: torch.device) -> str:
    """The device the latency was measured on, in words: the GPU's name, or the CPU's model name and the
    threads torch used."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import platform

    model = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model} (CPU, {torch.get_num_threads()} thread{'s' if torch.get_num_threads() > 1 else ''})"


def latency_table(run) -> dict:
    """Parameters, forward FLOPs and latency (batch 1, on `cfg.device`) of the E²GAN generator vs pix2pix.

    Every tensor the generators see (input, text tokens, mask) is on the model's device, and on CUDA
    the clock is read only after `torch.cuda.synchronize()`."""
    from torch.utils.flop_counter import FlopCounterMode

    setup, cfg = Setup(run), run.cfg
    tokens, mask = setup.encoder.encode(["sepia"])
    tokens, mask = tokens.to(setup.device), mask.to(setup.device)
    rows, metrics = [], {"device": device_name(setup.device)}
    for res in cfg.latency.resolutions:
        x = torch.zeros(1, 3, res, res, device=setup.device)
        for name, G in (("e2gan", setup.e2gan()), ("pix2pix", setup.pix2pix())):
            G.eval()
            with torch.no_grad(), FlopCounterMode(display=False) as fc:
                G(x, tokens, mask)
            times = forward_seconds(G, x, tokens, mask, cfg.latency.repeats)
            params = sum(p.numel() for p in G.parameters())
            rows.append({"model": name, "device": metrics["device"], "resolution": res, "params": params, "gflops": fc.get_total_flops() / 1e9,
                         "latency_ms_median": 1000 * float(np.median(times))})
            metrics[f"{name}_{res}"] = {"params": params, "flops": int(fc.get_total_flops()),
                                        "latency_ms_median": rows[-1]["latency_ms_median"]}
    for res in cfg.latency.resolutions:   # the paper's direction is E2GAN faster (15.5 vs 21.0 ms on an iPhone)
        metrics[f"pix2pix_over_e2gan_latency_{res}"] = (metrics[f"pix2pix_{res}"]["latency_ms_median"]
                                                        / metrics[f"e2gan_{res}"]["latency_ms_median"])
    run.save_table(pd.DataFrame(rows), "e2gan_latency")
    return metrics


