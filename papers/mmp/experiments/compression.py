"""`compression`: tables/compression, N×d numbers against C×(2d+1)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..data import make_cohort


def compression(run) -> dict:
    """Numbers per patient: the patch bag N×d against C tokens of (2d+1)."""
    cfg = run.cfg
    rows = []
    if cfg.data.source == "synthetic":
        cohort = make_cohort(cfg.data, run.seed)
        n_mean = float(np.mean([len(b) for b in cohort.bags]))
        rows.append({"setting": "this profile (mean bag)", "N": n_mean, "d": cfg.data.dim, "C": cfg.prototypes.n})
    p = cfg.paper_dims
    rows.append({"setting": "paper (UNI)", "N": p.n_patches, "d": p.dim, "C": p.n_prototypes})
    for r in rows:
        r["patch_numbers"] = r["N"] * r["d"]
        r["token_numbers"] = r["C"] * (2 * r["d"] + 1)
        r["ratio"] = r["patch_numbers"] / r["token_numbers"]
    run.save_table(pd.DataFrame(rows), "compression", floatfmt=".1f")
    out = {"paper_dims": {k: float(v) for k, v in rows[-1].items() if k != "setting"}, "from_config": ["paper_dims"]}
    if len(rows) == 2:
        out["profile_dims"] = {k: float(v) for k, v in rows[0].items() if k != "setting"}
    return out
