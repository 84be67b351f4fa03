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


def train_edit_net(images: np.ndarray, labels: np.ndarray, n_classes: int, *, steps: int, batch_size: int,
                   lr: float, width: int, seed: int) -> EditNet:
    """Cross-entropy with Adam on (N, H, W, 3) images in [0, 1], minibatches drawn with `seed`."""
    torch.manual_seed(seed)
    net = EditNet(n_classes, width)
    opt = torch.optim.Adam(net.parameters(), lr=lr, foreach=True)
    gen = torch.Generator().manual_seed(seed)
    x, y = _tensor(images), torch.as_tensor(labels, dtype=torch.long)
    for _ in range(steps):
        idx = torch.randint(len(x), (min(batch_size, len(x)),), generator=gen)
        xb = x[idx]
        flip = torch.rand(len(idx), generator=gen) < 0.5  # horizontal flips: no edit here depends on side
        xb = torch.where(flip[:, None, None, None], xb.flip(-1), xb)
        loss = nn.functional.cross_entropy(net(xb), y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return net.eval()


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


def cached_edit_net(path: Path, key: dict, data, n_classes: int, cfg, seed: int) -> EditFeatures:
    """The net at `path` when its run-cache key matches `key`; else trained on `data()` → (images,
    labels) (cfg: steps, batch_size, lr, width) and saved there with that key."""
    state = run_cache.load(path, key, what="fd feature net")
    net = EditNet(n_classes, cfg.width)
    if state is not None:
        net.load_state_dict(state)
    else:
        images, labels = data()
        net = train_edit_net(images, labels, n_classes, steps=cfg.steps, batch_size=cfg.batch_size, lr=cfg.lr,
                             width=cfg.width, seed=seed)
        tmp = path.with_name(path.name + ".tmp")
        run_cache.save(tmp, net.state_dict(), key)
        run_cache.key_file(tmp).replace(run_cache.key_file(path))
        tmp.replace(path)
    return EditFeatures(net)
