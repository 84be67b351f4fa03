"""`pi_share_knob`: tables/pi_share_knob, MMP-Trans against ABMIL and the full-token Transformer along
the share of histology risk carried by the prototype proportions π (against the within-cluster
morphology that the GMM means μ carry): `data.pi_share` at each of `knobs.pi_share`, every draw kept."""
from __future__ import annotations

from .arms import knob_data
from .knob_sweep import sweep


def pi_share_knob(run) -> dict:
    cfg = run.cfg
    return sweep(run, "pi_share_knob", "pi_share", list(cfg.knobs.pi_share), list(cfg.knobs.pi_share_arms),
                 lambda s: knob_data(cfg, pi_share=float(s)), "π share")
