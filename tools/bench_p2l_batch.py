"""What a P2L solver call costs per image as its batch grows: process CPU per image and DDIM step of
`papers.p2l.solver.solve` at the tiny profile's sizes, from one run on this machine (one thread).

    python tools/bench_p2l_batch.py [--batches 16 32 64 144 192] [--steps 8] [--save benchmarks/p2l_solve_batch.json]

The prior is built at the tiny profile's shapes with random weights (the cost of a pass does not depend on
the weights' values). Per method (LDPS: one UNet and one decoder pass, forward and backward, per step; P2L
at K = 1 and K = 2: one more of each per prompt step, plus the projection), the CPU per image and step at
each batch size and its ratio to the cost at 144 images (a tuning draw: 9 points × 16 validation images).
The equal-budget tuning's extension rounds and the test solves are calls of 16–32 images, so where they
dominate a job, its CPU follows the number of calls more than the number of images. A benchmark, not a
test: the ratios move with the processor.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from papers.p2l.components import assemble, tiny_tokenizer
from papers.p2l.data import CAPTION_LENGTH
from papers.p2l.experiments.problems import method_hparams
from papers.p2l.models import build_text_encoder, build_unet, build_vae   # sets HF_HUB_OFFLINE
from papers.p2l.operators import build_operator
from papers.p2l.solver import solve
from shared.config import load_config
from shared.machine_speed import least_cpu_s

REPO = Path(__file__).resolve().parents[1]
ARMS = {"ldps": ("ldps", {}), "p2l_K1": ("p2l", {"prompt_steps": 1}), "p2l_K2": ("p2l", {"prompt_steps": 2})}


def tiny_prior(cfg):
    """A LatentDiffusion at the tiny profile's shapes, random weights (seeded)."""
    torch.manual_seed(0)
    vae = build_vae(list(cfg.vae.channels), cfg.vae.latent_channels, cfg.image_size,
                    mid_attention=bool(cfg.vae.get("mid_attention", True)))
    latent = cfg.image_size // 2 ** (len(cfg.vae.channels) - 1)
    unet = build_unet(list(cfg.ldm.unet_channels), cfg.vae.latent_channels, latent, cfg.ldm.text_dim,
                      text_time_embedding=bool(cfg.ldm.get("text_time_embedding", False)))
    text = build_text_encoder(len(tiny_tokenizer()), cfg.ldm.text_dim, cfg.ldm.text_layers, CAPTION_LENGTH)
    return assemble(vae, unet, text, 1.0, torch.device("cpu"))


def cpu_per_image_step(ldm, op, method: str, hp: dict, batch: int, steps: int, image_size: int,
                       repeats: int = 3) -> float:
    """Process CPU-s per image and DDIM step of one solve call: the least of `repeats` calls after one
    warm-up call of that size (the least is the least disturbed by other work on the machine)."""
    x = torch.rand(batch, 3, image_size, image_size, generator=torch.Generator().manual_seed(1)) * 2 - 1
    y = op.measure(x, 0)

    def call():
        solve(method, y, op, ldm, steps=steps, seed=0, **hp)

    return least_cpu_s(call, repeats) / (batch * steps)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[16, 32, 64, 144, 192])
    ap.add_argument("--steps", type=int, default=8, help="DDIM steps per call")
    ap.add_argument("--reference", type=int, default=144, help="the batch size the ratios are to")
    ap.add_argument("--repeats", type=int, default=3, help="timed calls per size (the least is kept)")
    ap.add_argument("--save", type=Path, default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    cfg = load_config(REPO / "papers/p2l/config.yaml", "tiny")
    ldm = tiny_prior(cfg)
    op = build_operator("sr", cfg.image_size, sigma_y=cfg.solve.sigma_y, seed=cfg.seed, **dict(cfg.tasks.sr))
    batches = sorted(set(args.batches) | {args.reference})
    rows = []
    for arm, (method, extra) in ARMS.items():
        hp = {**method_hparams(cfg, method), **extra}
        ms = {b: 1e3 * cpu_per_image_step(ldm, op, method, hp, b, args.steps, cfg.image_size, args.repeats)
              for b in batches}
        for b in batches:
            rows.append({"arm": arm, "batch": b, "cpu_ms_per_image_step": round(ms[b], 3),
                         "ratio_to_reference": round(ms[b] / ms[args.reference], 2)})
            print(f"{arm:8s} batch {b:4d}: {ms[b]:7.3f} ms per image and step, "
                  f"{ms[b] / ms[args.reference]:.2f}× the cost at {args.reference}")
    out = {"what": "process CPU per image and DDIM step of one P2L solver call (SR×4, tiny shapes, random "
                   "weights), the least of `repeats` calls, one run, one thread; ratio to the cost at the reference batch",
           "reference_batch": args.reference, "steps": args.steps, "repeats": args.repeats, "torch": torch.__version__, "rows": rows}
    if args.save:
        args.save.write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    main()
