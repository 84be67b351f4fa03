"""Procedural "captioned shapes": 16×16 RGB images drawn from attributes, with 3-word captions.

3 shapes × 3 colours × 2 backgrounds, a jittered position and size; caption "<colour> <shape> <background>".
(The brief's world was 4 × 4 × 3 at 32×32; it was shrunk so that a prior trained in minutes on one core
follows its captions: see the README.)
Every image is a pure function of (seed, index), so splits are reproducible and need no files.
Pixel values are in [-1, 1], the scale the measurement noise σ_y refers to.
"""
from __future__ import annotations

import numpy as np
import torch

from shared.seeding import derive_seed

SHAPES = ("circle", "square", "triangle")
COLOURS = {"red": (0.9, 0.15, 0.1), "green": (0.1, 0.75, 0.2), "blue": (0.15, 0.3, 0.95)}
BACKGROUNDS = {"dark": (0.1, 0.1, 0.12), "light": (0.92, 0.92, 0.88)}
ATTRIBUTES = {"shape": SHAPES, "colour": tuple(COLOURS), "background": tuple(BACKGROUNDS)}
WORDS = [*SHAPES, *COLOURS, *BACKGROUNDS]
CAPTION_LENGTH = 3
SUPERSAMPLE = 4


def _mask(shape: str, size: int, cx: float, cy: float, r: float) -> np.ndarray:
    """Coverage of the shape on a size×size grid (anti-aliased by supersampling)."""
    n = size * SUPERSAMPLE
    g = (np.arange(n) + 0.5) / SUPERSAMPLE
    X, Y = np.meshgrid(g, g)
    dx, dy = X - cx, Y - cy
    if shape == "circle":
        m = dx**2 + dy**2 <= r**2
    elif shape == "square":
        m = (np.abs(dx) <= 0.8 * r) & (np.abs(dy) <= 0.8 * r)
    elif shape == "triangle":
        m = (dy <= 0.8 * r) & (dy >= -r + 2 * np.abs(dx))
    elif shape == "cross":
        w = 0.35 * r
        m = ((np.abs(dx) <= w) & (np.abs(dy) <= r)) | ((np.abs(dy) <= w) & (np.abs(dx) <= r))
    else:
        raise ValueError(f"unknown shape {shape!r}; choose from {SHAPES}")
    return m.reshape(size, SUPERSAMPLE, size, SUPERSAMPLE).mean(axis=(1, 3))


def render(shape: str, colour: str, background: str, size: int = 16, cx: float | None = None,
           cy: float | None = None, r: float | None = None) -> np.ndarray:
    """One image [3, size, size] in [-1, 1]."""
    cx = size / 2 if cx is None else cx
    cy = size / 2 if cy is None else cy
    r = size * 0.3 if r is None else r
    m = _mask(shape, size, cx, cy, r)[None]
    fg = np.asarray(COLOURS[colour])[:, None, None]
    bg = np.asarray(BACKGROUNDS[background])[:, None, None]
    img = m * fg + (1 - m) * bg
    return (2 * img - 1).astype(np.float32)


def sample(seed: int, index: int, size: int = 16) -> tuple[np.ndarray, str, tuple[int, int, int]]:
    """Image, caption and attribute labels (shape, colour, background) of item `index`."""
    rng = np.random.default_rng(derive_seed(seed, "shapes", index))
    s, c, b = rng.integers(len(SHAPES)), rng.integers(len(COLOURS)), rng.integers(len(BACKGROUNDS))
    r = size * rng.uniform(0.28, 0.36)
    cx, cy = size / 2 + rng.uniform(-0.08, 0.08, size=2) * size
    shape, colour, bg = SHAPES[s], ATTRIBUTES["colour"][c], ATTRIBUTES["background"][b]
    img = render(shape, colour, bg, size, cx, cy, r)
    return img, f"{colour} {shape} {bg}", (int(s), int(c), int(b))


def make_split(seed: int, split: str, n: int, size: int = 16) -> dict:
    """A split ("train", "val", "test", "ref") of n items: images [n,3,H,W], captions, labels [n,3]."""
    offsets = {"train": 0, "val": 10_000_000, "test": 20_000_000, "ref": 30_000_000}
    items = [sample(seed, offsets[split] + i, size) for i in range(n)]
    return {"images": torch.from_numpy(np.stack([it[0] for it in items])),
            "captions": [it[1] for it in items],
            "labels": torch.tensor([it[2] for it in items], dtype=torch.long)}
