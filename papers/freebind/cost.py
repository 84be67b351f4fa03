"""What a bond costs against retraining the unified space: trainable parameters, training FLOPs (from
the configured shapes, counted by PyTorch's FLOP counter on one training step of each) and training time
(each seed's own job times both, in one process, so the ratio is taken within one run)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from torch.utils.flop_counter import FlopCounterMode

from shared.samples import sample

from .bonds import bond_loss
from .projector import ProjectorBank
from .spaces import info_nce, make_encoder
from .summaries import seed_results
from .world import VOCAB


def _projector_params(d_in: int, d_out: int, hidden: int) -> int:
    return d_in * hidden + hidden + 2 * hidden + hidden * d_out + d_out + 2 * d_out


def _step_flops(step) -> int:
    """FLOPs of one forward + backward (matrix products; an EmbeddingBag's gather counts 0)."""
    with FlopCounterMode(display=False) as counter:
        step().backward()
    return int(counter.get_total_flops())


def _pair_step(mod_a: str, mod_b: str, width: int, dim: int, batch: int, freeze_b: bool):
    """One step of `spaces.PairModule` (its loss on one batch; the frozen side runs without gradients)."""
    inputs = {"image": lambda: torch.randn(batch, 192), "audio": lambda: torch.randn(batch, 384),
              "text": lambda: torch.randint(1, VOCAB, (batch, 8))}
    enc_a, enc_b = make_encoder(mod_a, width, dim), make_encoder(mod_b, width, dim)
    xa, xb = inputs[mod_a](), inputs[mod_b]()

    def step():
        if freeze_b:
            with torch.no_grad():
                zb = enc_b(xb)
        else:
            zb = enc_b(xb)
        return info_nce(enc_a(xa), zb, 0.07)

    return step


def _bond_step(d_in: int, d_out: int, hidden: int, batch: int, mods: tuple[str, ...], tau: float):
    bank = ProjectorBank(7, d_in, d_out, hidden).train()
    src = {m: torch.nn.functional.normalize(torch.randn(7, batch, d_in), dim=-1) for m in mods}
    tgt = {m: torch.nn.functional.normalize(torch.randn(7, batch, d_out), dim=-1) for m in mods}
    return lambda: bond_loss({m: bank(x) for m, x in src.items()}, tgt, mods, (), tau, dense=False).sum()


def training_flops(cfg) -> dict:
    """Training FLOPs of retraining U (its two stages) and of one combination bond (7 projectors), from
    the configured sizes: FLOPs of one step × the number of steps. The bond's held-out checks (forward
    passes on its validation rows every `eval_every` steps) are left out, a few percent."""
    s, b = cfg.spaces, cfg.bonds
    u_it = _step_flops(_pair_step("image", "text", s.u_width, s.u_dim, s.batch, False))
    u_ai = _step_flops(_pair_step("audio", "image", s.u_width, s.u_dim, s.batch, True))
    steps_it = s.epochs * (s.u_pairs // s.batch)
    steps_ai = s.u_audio_epochs * (s.u_audio_pairs // s.batch)
    bond = _step_flops(_bond_step(s.at_dim, s.u_dim, b.hidden, b.batch, ("audio", "text"), b.tau))
    u_total = u_it * steps_it + u_ai * steps_ai
    one_bond = bond * b.steps
    return {"from_config": True, "U_step_flops": {"image_text": u_it, "audio_image": u_ai},
            "U_steps": {"image_text": steps_it, "audio_image": steps_ai}, "U_train_flops": u_total,
            "bond_step_flops": bond, "bond_steps": int(b.steps), "bond_train_flops": one_bond,
            "parallel_bond_train_flops": 2 * one_bond, "parallel_bond_vs_U_flops": 2 * one_bond / u_total}


def cost(run) -> dict:
    seeds = seed_results(run)
    s0 = seeds[0]
    if "params" not in s0:  # full profile: the released projectors' sizes (7 per bond direction)
        d, h = run.cfg.full.dims, run.cfg.full.proj_hidden
        params = {f"bond_{name}": 7 * _projector_params(d[a], d[b], h) for name, (a, b) in {
            "c_clap_g": ("clap_g", "imagebind"), "c_clap_m": ("clap_m", "imagebind"),
            "d_internvl": ("imagebind", "internvl")}.items()}
        run.save_table(pd.DataFrame([{"item": k, "trainable params": v} for k, v in params.items()]), "bond_cost")
        return {"params": params}
    flops = training_flops(run.cfg)
    bonds = [k for k in s0["params"] if k.startswith("bond_")]
    rows = []
    for b in bonds:
        t = [s["timing"][f"{b}_s"] for s in seeds]
        rows.append({"item": b.replace("bond_", "bond "), "trainable params": s0["params"][b],
                     "train GFLOPs": flops["bond_train_flops"] / 1e9 if b in ("bond_c_E1", "bond_c_E2") else None,
                     "train time (s)": float(np.mean(t))})
    rows.append({"item": "all four spaces (U, E1, E2, VT) from scratch", "trainable params": None, "train GFLOPs": None,
                 "train time (s)": float(np.mean([s["timing"]["spaces_s"] for s in seeds]))})
    rows.append({"item": "retraining the unified space U (image-text, then audio)",
                 "trainable params": s0["params"]["U_encoders"], "train GFLOPs": flops["U_train_flops"] / 1e9,
                 "train time (s)": float(np.mean([s["timing"]["U_s"] for s in seeds]))})
    run.save_table(pd.DataFrame(rows), "bond_cost", floatfmt=".2f")
    parallel = s0["params"]["bond_c_E1"] + s0["params"]["bond_c_E2"]
    # each seed's ratio within its own job (both timed by one process on one machine)
    time_ratio = sample([(s["timing"]["bond_c_E1_s"] + s["timing"]["bond_c_E2_s"]) / s["timing"]["U_s"]
                         for s in seeds], "seed")
    return {"params": s0["params"], "parallel_bond_params": parallel,
            "parallel_bond_vs_U_params": parallel / s0["params"]["U_encoders"],
            "flops": flops, "parallel_bond_vs_U_time": time_ratio}
