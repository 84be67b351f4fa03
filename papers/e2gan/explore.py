"""Live exploration for the notebook: pick an image and a concept, compare the teacher with the
student (the clustered base plus a chosen per-concept adapter), switch adapters."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from shared.config import load_config
from shared.seeding import derive_seed

from .data import slug, to_images, to_tensor
from .experiments import Setup, load_base
from .experiments.arms import lora_alpha
from .lora import add_lora, load_adapter

CONFIG = Path(__file__).with_name("config.yaml")
NO_ADAPTER = "none (base model)"


def model_device(G: torch.nn.Module) -> torch.device:
    return next(G.parameters()).device


@torch.no_grad()
def student_forward(G: torch.nn.Module, encoder, x: np.ndarray, concept: str) -> torch.Tensor:
    """G's edit of images x (N, H, W, 3) for `concept`; the input, tokens and mask go to G's device."""
    device = model_device(G)
    tokens, mask = encoder.encode([concept] * len(x))
    return G(to_tensor(x).to(device), tokens.to(device), mask.to(device))


class Explorer:
    def __init__(self, results_dir: str | Path, profile: str, overlay=None):
        cfg = load_config(CONFIG, profile, overlay=overlay)   # overlay: the rehearsal's, as the experiments read it
        run = SimpleNamespace(cfg=cfg, seed=int(cfg.seed), out=Path(results_dir), profile=profile)
        self.setup = Setup(run)
        self.seed = run.seed
        base = load_base(run, self.setup, "clustered")
        adapters = run.out / "checkpoints" / "concept_table" / "adapters"
        self.ranks = json.loads((adapters / "ranks.json").read_text())
        self.adapters = {c: adapters / f"{slug(c)}.safetensors" for c in cfg.concepts.new
                         if (adapters / f"{slug(c)}.safetensors").is_file()}
        self.G = self.setup.e2gan()
        self.G.load_state_dict(base["G"])
        add_lora(self.G, self.ranks, lora_alpha(cfg))
        self.G.eval()
        self.prompts = list(cfg.concepts.new) + list(self.setup.teacher.prompts() if hasattr(self.setup.teacher, "prompts") else [])
        self.prompts = list(dict.fromkeys(self.prompts))
        self.adapter_names = [NO_ADAPTER, *self.adapters]
        self.n_images = len(self.setup.test_inputs)

    def use_adapter(self, name: str) -> None:
        if name == NO_ADAPTER:
            with torch.no_grad():
                for n, p in self.G.named_parameters():
                    if "lora_B" in n:
                        p.zero_()
        else:
            from safetensors.torch import load_file

            load_adapter(self.G, load_file(str(self.adapters[name])))

    @torch.no_grad()
    def compare(self, index: int, concept: str, adapter: str) -> dict[str, np.ndarray]:
        x = self.setup.test_inputs[index:index + 1]
        teacher = self.setup.teacher.edit(x, concept, derive_seed(self.seed, "explore"))
        self.use_adapter(adapter)
        student = to_images(student_forward(self.G, self.setup.encoder, x, concept))
        return {"input": x[0], "teacher": teacher[0], f"student ({adapter})": student[0]}

    def show(self, index: int = 0, concept: str | None = None, adapter: str | None = None):
        import matplotlib.pyplot as plt

        concept = concept or self.prompts[0]
        adapter = adapter or (concept if concept in self.adapters else NO_ADAPTER)
        panels = self.compare(index, concept, adapter)
        fig, axes = plt.subplots(1, len(panels), figsize=(2.2 * len(panels), 2.4))
        for ax, (title, img) in zip(axes, panels.items()):
            ax.imshow(np.clip(img, 0, 1))
            ax.set_title(title, fontsize=7)
            ax.axis("off")
        fig.suptitle(concept, fontsize=8)
        plt.show()
        return fig
