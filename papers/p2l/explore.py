"""Live reconstruction of one image for the notebook's exploration section."""
from __future__ import annotations

from pathlib import Path

import torch

from shared.config import load_config

from . import metrics as M
from .experiments import load_classifier, load_images, load_prior
from .operators import build_operator
from .solver import hparams_of, solve

CONFIG = Path(__file__).with_name("config.yaml")


class Explorer:
    """Loads the trained prior of `results_dir` once; `reconstruct` solves one test image."""

    def __init__(self, results_dir: str | Path, profile: str, overlay=None):
        self.cfg = load_config(CONFIG, profile, overlay=overlay)   # overlay: the rehearsal's, as the experiments read it
        self.results_dir = Path(results_dir)
        self.ldm, self.clf = load_prior(self.cfg, self.results_dir), load_classifier(self.cfg, self.results_dir)
        self.test = load_images(self.cfg, "test", 4)

    def tuned(self, task: str, method: str) -> dict:
        """The hyper-parameters the workflow tuned for (task, method), when its metrics exist."""
        from shared.io import read_json

        path = self.results_dir / "metrics" / f"main_{task}.json"
        if path.is_file():
            methods = read_json(path)["methods"]
            if method in methods:
                return dict(methods[method]["tuned"])
        return {}

    def reconstruct(self, task="sr", sigma_y=0.05, method="p2l", rho=None, steps=None, index=0, lam=None,
                    tau=None, K=None, prompt_lr=None):
        """One image. rho=None: the workflow's tuned ρ; steps=None: the workflow's number of DDIM steps
        (solve.steps); lam, tau, K (prompt_steps), prompt_lr override the method's config values."""
        import matplotlib.pyplot as plt

        cfg = self.cfg
        op = build_operator(task, cfg.image_size, sigma_y=sigma_y, seed=cfg.seed, **dict(cfg.tasks.get(task, {})))
        x = self.test["images"][index:index + 1]
        y = op.measure(x, cfg.seed)
        caps = None if self.test["captions"] is None else self.test["captions"][index:index + 1]
        hp = {**dict(cfg.hparams.get(method, {}) or {}), **self.tuned(task, method)}
        for key, value in (("rho", rho), ("lam", lam), ("tau", tau), ("prompt_steps", K), ("prompt_lr", prompt_lr)):
            if value is not None:
                hp[key] = type(hparams_of(method)[key])(value)
        hp.setdefault("rho", 1.0)
        steps = int(cfg.solve.steps if steps is None else steps)
        sol = solve(method, y, op, self.ldm, steps=steps, seed=cfg.seed, captions=caps, **hp)
        fig, axes = plt.subplots(1, 3, figsize=(5, 1.9))
        for ax, img, title in zip(axes, (op.pseudo_adjoint(y)[0], sol.x[0], x[0]), ("measurement", method, "truth")):
            ax.imshow(((img.permute(1, 2, 0) + 1) / 2).clamp(0, 1).numpy(), interpolation="nearest")
            ax.set_title(title, fontsize=8)
            ax.axis("off")
        fig.suptitle(f"{task}, σ_y={sigma_y}, {steps} steps, ρ={hp['rho']:g}: PSNR {M.psnr(sol.x, x)[0]:.2f} dB, "
                     f"SSIM {M.ssim(sol.x, x)[0]:.3f}", fontsize=7)
        fig.tight_layout()
        return fig
