"""tables/ot_speed: one MMP-OT training step, batched Sinkhorn against POT's per-patient loop
(run inside the `cost` experiment)."""
from __future__ import annotations

import time as clock

import numpy as np
import pandas as pd
import torch

from shared.seeding import derive_seed

from ..panther import aggregate_bags
from .arms import build_model


def ot_speedup(run) -> dict:
    """Training-step time of MMP-OT (forward + backward of the Cox loss on `cost.ot_batch`
    patients at this profile's token sizes) with the batched Sinkhorn against POT's per-patient
    loop; same model, inputs and plans. Best of `cost.ot_steps` steps each."""
    from ..losses import cox_loss

    cfg, seed = run.cfg, run.seed
    rng = np.random.default_rng(derive_seed(seed, "ot_speed"))
    d, n_p, b = cfg.data.dim, cfg.data.n_pathways, cfg.cost.ot_batch
    pathways = [np.arange(i, i + cfg.data.genes_min) % cfg.data.n_genes for i in range(n_p)]
    cohort_like = type("C", (), {"bags": [np.zeros((1, d), np.float32)], "pathways": pathways})
    bags = [rng.normal(size=(500, d)).astype(np.float32) for _ in range(b)]
    protos = rng.normal(size=(cfg.prototypes.n, d)).astype(np.float32)
    hist = torch.from_numpy(aggregate_bags(bags, protos, tau=cfg.panther.tau, eps=cfg.panther.eps,
                                           n_iter=cfg.panther.n_iter))
    batch = {"hist": hist, "genes": torch.from_numpy(rng.normal(size=(b, cfg.data.n_genes)).astype(np.float32))}
    time_, event = torch.from_numpy(rng.exponential(size=b)), torch.from_numpy(rng.uniform(size=b) < 0.4)
    times, plans = {}, {}
    for solver in ("batched", "pot"):
        model = build_model("mmp_ot", cfg, cohort_like, 1, seed)
        model.ot_solver = solver
        model.eval()                        # no dropout: both solvers see the same tokens
        best = np.inf
        for _ in range(cfg.cost.ot_steps):
            model.zero_grad()
            t0 = clock.perf_counter()
            out, plan = model(batch, return_map=True)
            cox_loss(out[:, 0], time_, event).backward()
            best = min(best, clock.perf_counter() - t0)
        times[solver], plans[solver] = best, plan.detach()
    diff = float((plans["batched"] - plans["pot"]).abs().max() / plans["pot"].abs().max())
    run.save_table(pd.DataFrame([{"solver": "POT, one patient at a time (official)", "step_s": times["pot"]},
                                 {"solver": "kernels.sinkhorn_unbalanced, whole batch", "step_s": times["batched"]},
                                 {"solver": f"speed-up (batch of {b}; plans agree to {diff:.1e} relative)",
                                  "step_s": times["pot"] / times["batched"]}]), "ot_speed", floatfmt=".4g")
    return {"pot_step_s": times["pot"], "batched_step_s": times["batched"],
            "speedup": times["pot"] / times["batched"], "plan_max_rel_diff": diff, "batch": b}
