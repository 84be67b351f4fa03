"""Live reconstruction of one image for the notebook's exploration section."""
from __future__ import annotations

from pathlib import Path

import torch

from shared.config import load_config

from . import metrics as M
from .experiments import load_classifier, load_images, load_prior
from .operators import build_operator
from .solver import solve

CONFIG = Path(__file__).with_name("config.yaml")


class Explorer:
    """Loads the trained prior of `results_dir` once; `reconstruct` solves one test image."""

    def __init__(self, results_dir: str | Path, profile: str):
        self.cfg = load_config(CONFIG, profile)
        self.ldm, self.clf = load_prior(self.cfg, Path(results_dir)), load_classifier(self.cfg, Path(results_dir))
        self.test = load_images(self.cfg, "test", 4)

    def reconstruct(self, task="sr", sigma_y=0.05, method="p2l", rho=1.0, steps=8, index=0):
        import matplotlib.pyplot as plt

        cfg = self.cfg
        op = build_operator(task, cfg.image_size, sigma_y=sigma_y, seed=cfg.seed, **dict(cfg.tasks.get(task, {})))
        x = self.test["images"][index:index + 1]
        y = op.measure(x, cfg.seed)
        caps = None if self.test["captions"] is None else self.test["captions"][index:index + 1]
        hp = {**dict(cfg.hparams.get(method, {}) or {}), "rho": float(rho)}
        sol = solve(method, y, op, self.ldm, steps=int(steps), seed=cfg.seed, captions=caps, **hp)
        fig, axes = plt.subplots(1, 3, figsize=(5, 1.9))
        for ax, img, title in zip(axes, (op.pseudo_adjoint(y)[0], sol.x[0], x[0]), ("measurement", method, "truth")):
            ax.imshow(((img.permute(1, 2, 0) + 1) / 2).clamp(0, 1).numpy(), interpolation="nearest")
            ax.set_title(title, fontsize=8)
            ax.axis("off")
        fig.suptitle(f"{task}, σ_y={sigma_y}: PSNR {M.psnr(sol.x, x)[0]:.2f} dB, SSIM {M.ssim(sol.x, x)[0]:.3f}",
                     fontsize=8)
        fig.tight_layout()
        return fig
