"""`cohort_size_knob`: tables/cohort_size_knob, MMP-Trans against ABMIL along the cohort's size
(`data.n_patients` at each of `knobs.n_patients`; each size is its own draw at the run's seed, the folds
paired by index)."""
from __future__ import annotations

from .arms import knob_data
from .knob_sweep import sweep


def cohort_size_knob(run) -> dict:
    cfg = run.cfg
    return sweep(run, "cohort_size_knob", "n_patients", [int(n) for n in cfg.knobs.n_patients], list(cfg.knobs.size_arms),
                 lambda n: knob_data(cfg, n_patients=int(n)), "patients")
