"""The full profile's cost (tools/plan.py) and one real-shape step (tools/gpu_smoke.py).

At full FreeBind trains nothing: `bonds_s0` applies the released projectors (mixtures of 7 two-layer
MLPs, papers.freebind.full) to the precomputed embeddings of every dataset and scores retrieval and
zero-shot classification; `bonds_s1..7` and the `fragile_p*` points write a skipped record. FLOPs are
analytic: projector applications (2 × params per item and member) and the score matrices
(2 · queries · gallery · d). Dataset sizes are the public evaluation splits' item counts (stated).
"""
from __future__ import annotations

import torch

from shared.cost_plan import Cost, autocast

from .summaries import N_SEED_JOBS

# evaluation items per dataset (queries, gallery or classes), stated from the public splits
ITEMS = {"esc50": (2000, 50), "audioset": (20000, 527), "imagenet": (50000, 1000), "audiocaps": (4875, 975),
         "clotho": (5225, 1045), "vggss": (5000, 5000), "flickrnet": (5000, 5000), "coco": (25000, 5000),
         "flickr30k": (5000, 1000)}
MEMBERS = 7                 # {mix, A, T, V, AT, AV, TV}
BONDS = 5                   # projector folders (IB_PP_{G,M}, InternVL_IB, InternVL_IB_PP_{G,M})
VARIANTS = 12               # table rows and λ-curve points scored per dataset (stated upper bound)


def _projector_flops(d_in: int, d_out: int, hidden: int) -> int:
    return 2 * (d_in * hidden + hidden * d_out)


def job_costs(cfg) -> list[Cost]:
    d, f = cfg.full.dims if "dims" in cfg.full else {}, cfg.full
    dims = dict(d) or {"imagebind": 1024, "clap_g": 512, "clap_m": 512, "internvl": 768}
    hidden = int(f.get("proj_hidden", 2048))
    dmax = max(dims.values())
    proj = _projector_flops(dmax, dmax, hidden) * MEMBERS * BONDS
    flops, bytes_read = 0.0, 0.0
    for ds in f.get("datasets", list(ITEMS)):
        q, g = ITEMS.get(ds, (50000, 5000))
        flops += (q + g) * proj + VARIANTS * 2 * q * g * dmax
        bytes_read += (q + g) * sum(dims.values()) * 4 * 3    # three modalities' arrays (upper bound)
    prec = str(cfg.trainer.precision)
    mem = 4 * max(q * g for q, g in ITEMS.values()) / 1e9 + 4 * max(q for q, _ in ITEMS.values()) * dmax * 4 / 1e9
    costs = [Cost("bonds_s0", "gpu", flops=flops, flops_how="analytic", precision=prec, gpu_mem_gb=mem + 1,
                  mem_how="analytic", bytes_read=bytes_read + BONDS * MEMBERS * 4 * 2 * dmax * hidden, host_s=600,
                  note="released projectors on every dataset; loading stated as 10 min")]
    for i in range(1, N_SEED_JOBS):
        costs.append(Cost(f"bonds_s{i}", "gpu", flops_how="stated", precision=prec, host_s=30,
                          note="full: a skipped record (the released projectors are evaluated once)"))
    for i in range(3):
        costs.append(Cost(f"fragile_p{i}", "gpu", flops_how="stated", precision=prec, host_s=30,
                          note="full: a skipped record (no visibility knob on real data)"))
    for name in ("main_table", "lambda_tradeoff", "fragile", "cost"):
        costs.append(Cost(name, "cpu", cpu_s=120, cpu_how="stated", note="tables and figures from the metrics"))
    return costs


def probe_flops(cfg) -> float:
    """FLOPs of one full-shape `probe_step`, for the smoke's measured s/step."""
    return 4096 * _projector_flops(1024, 1024, int(cfg.full.get("proj_hidden", 2048))) * MEMBERS + 2 * 4096 * 1000 * 1024


def probe_step(cfg, device: str = "cpu"):
    """One projector mixture applied to a batch of 4096 ImageBind-sized embeddings and scored against a
    1000-class gallery, at the configured precision (the full job's inner loop). Returns a callable."""
    from .projector import Projector

    real = bool(cfg.full.get("embeddings_dir"))   # the full profile; smaller profiles probe a small shape
    hidden = int(cfg.full.get("proj_hidden", 2048)) if real else int(cfg.bonds.hidden)
    d, n = (1024, 4096) if real else (64, 256)
    members = [Projector(d, d, hidden).to(device).eval() for _ in range(MEMBERS)]
    x = torch.randn(n, d, device=device)
    gallery = torch.nn.functional.normalize(torch.randn(1000, d, device=device), dim=1)

    @torch.no_grad()
    def step():
        with autocast(device, str(cfg.trainer.precision)):
            z = torch.stack([m(x) for m in members]).mean(0)
            return (z @ gallery.T).argmax(1)

    return step
