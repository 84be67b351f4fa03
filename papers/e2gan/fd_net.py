"""The `fd` proxy's feature network: a small CNN trained here to tell the teacher's edits apart.

It classifies an image as one of the pool's concepts (the teacher's output on a training input) or as
"identity" (the input itself); its penultimate activations (global-average-pooled, `width`·4 dims) are
the feature space of the Fréchet distance `fd`, the CPU-scale stand-in for FID's InceptionV3 (still a
proxy: trained on the skimage teacher's edits, on 24² crops). Trained once per results folder and
cached with its run-cache key (`shared.run_cache`), so a rerun with the same config reuses it.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import IterableDataset

from shared import run_cache



class EditNet(nn.Module):
    """conv3×3(3→w) → conv(w→2w, /2) → conv(2w→4w, /2), ReLU each, global average pool → linear head."""

    def __init__(self, n_classes: int, width: int = 16):
        super().__init__()
        w = width
        self.body = nn.Sequential(
            nn.Conv2d(3, w, 3, padding=1), nn.ReLU(),
            nn.Conv2d(w, 2 * w, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(2 * w, 4 * w, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(4 * w, n_classes)

    def forward(self, x):
        return self.head(self.body(x))


def _tensor(images: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(images, dtype=np.float32)).permute(0, 3, 1, 2) * 2 - 1


class FlippedBatches(IterableDataset):
    """`steps` minibatches of `batch_size` (image, label) pairs, drawn with replacement, each image then
    flipped horizontally with probability ½ (no edit here depends on side); indices and coins come from
    one generator seeded with `seed`, in that order per step."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, steps: int, batch_size: int, seed: int):
        self.x, self.y, self.steps, self.batch_size, self.seed = x, y, steps, min(batch_size, len(x)), seed

    def __iter__(self):
        gen = torch.Generator().manual_seed(self.seed)
        for _ in range(self.steps):
            idx = torch.randint(len(self.x), (self.batch_size,), generator=gen)
            flip = torch.rand(len(idx), generator=gen) < 0.5
            xb = self.x[idx]
            yield torch.where(flip[:, None, None, None], xb.flip(-1), xb), self.y[idx]


def train_edit_net(images: np.ndarray, labels: np.ndarray, n_classes: int, *, steps: int, batch_size: int,
                   lr: float, width: int, seed: int) -> tuple[EditNet, list[dict]]:
    """Cross-entropy with Adam on (N, H, W, 3) images in [0, 1], minibatches drawn with `seed`, trained
    through `shared.training` as a throw-away fit (seconds; the net is cached by `cached_edit_net`).
    Returns the net and its loss rows (step, loss) from the fit's CSV log."""
    from torch.utils.data import DataLoader

    from shared.training import fit, fit_folder, make_trainer

    from .edit_net_module import EditNetModule
    from .train import log_interval, read_losses

    torch.manual_seed(seed)
    net = EditNet(n_classes, width)
    x, y = _tensor(images), torch.as_tensor(labels, dtype=torch.long)
    options, log_every = {"accelerator": "cpu"}, log_interval(steps)
    with fit_folder(None, options, prefix="e2gan_edit_net_") as root:
        trainer = make_trainer(root, seed=seed, max_steps=steps, max_epochs=1, progress=False,
                               log_every_n_steps=log_every, checkpoint=False, **options)
        fit(trainer, EditNetModule(net, lr, log_every), DataLoader(FlippedBatches(x, y, steps, batch_size, seed), batch_size=None))
        losses = read_losses(root / "logs" / "metrics.csv", ("loss",))
    return net.eval(), losses


class EditFeatures:
    """images (N, H, W, 3) in [0, 1] → (N, 4·width) penultimate features of a trained `EditNet`."""

    def __init__(self, net: EditNet):
        self.net = net.eval()

    @torch.no_grad()
    def __call__(self, images: np.ndarray) -> np.ndarray:
        return np.concatenate([self.net.body(_tensor(images[s:s + 256])).numpy().astype(np.float64)
                               for s in range(0, len(images), 256)])

    @torch.no_grad()
    def accuracy(self, images: np.ndarray, labels: np.ndarray) -> float:
        return float((self.net(_tensor(images)).argmax(1).numpy() == np.asarray(labels)).mean())


def labelled_edits(inputs: np.ndarray, prompts: list[str], edit) -> tuple[np.ndarray, np.ndarray]:
    """(images, labels): the inputs (label 0, "identity") and `edit(inputs, prompt)` for each prompt
    (label 1 + its index)."""
    images = [inputs] + [edit(inputs, p) for p in prompts]
    labels = [np.full(len(im), i) for i, im in enumerate(images)]
    return np.concatenate(images), np.concatenate(labels)


def losses_file(path: Path) -> Path:
    """The loss rows (step, loss) of the cached net at `path`, kept beside it as CSV."""
    return path.with_name(path.stem + ".losses.csv")


def read_edit_net_losses(path: Path) -> list[dict]:
    """The loss rows kept beside the cached net at `path` ([] for a net cached before they were kept)."""
    import pandas as pd

    return pd.read_csv(losses_file(path)).to_dict("records") if losses_file(path).is_file() else []


def cached_edit_net(path: Path, key: dict, data, n_classes: int, cfg, seed: int) -> EditFeatures:
    """The net at `path` when its run-cache key matches `key`; else trained on `data()` → (images,
    labels) (cfg: steps, batch_size, lr, width) and saved there with that key, its loss rows beside it
    (`losses_file`)."""
    import pandas as pd

    state = run_cache.load(path, key, what="fd feature net")
    net = EditNet(n_classes, cfg.width)
    if state is not None:
        net.load_state_dict(state)
    else:
        images, labels = data()
        net, losses = train_edit_net(images, labels, n_classes, steps=cfg.steps, batch_size=cfg.batch_size,
                                     lr=cfg.lr, width=cfg.width, seed=seed)
        path.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(losses, columns=["step", "loss"]).to_csv(losses_file(path), index=False)
        tmp = path.with_name(path.name + ".tmp")
        run_cache.save(tmp, net.state_dict(), key)
        run_cache.key_file(tmp).replace(run_cache.key_file(path))
        tmp.replace(path)
    return EditFeatures(net)
