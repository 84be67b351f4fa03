"""Procedural moving-digit clips (tiny/smoke) and the tubelet-token ground truth of the moving digit.

A clip: 16 frames of 32×32 grayscale. A textured static background, one static distractor digit and
one moving digit (sklearn's bundled `load_digits`, 8×8), plus small Gaussian noise. The class is the
moving digit's motion pattern: 8 directions (classes 0-7), optionally circle, bounce and stop-go.
Controls: a global camera pan (background and distractor shift, the digit keeps its image motion, so
every token moves) and flicker (global brightness oscillation). Seeded: the same seed gives the same
clips.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.ndimage import gaussian_filter

EXTRA_PATTERNS = ("circle", "bounce", "stopgo")


@dataclass
class Clips:
    video: torch.Tensor    # [n, 1, F, H, W] float32 in [0, 1]
    labels: torch.Tensor   # [n] int64
    moving: torch.Tensor   # [n, F, H, W] bool: pixels of the moving digit

    def __len__(self) -> int:
        return len(self.labels)

    def batch(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.video[idx], self.labels[idx]

    def subset(self, n: int) -> "Clips":
        return Clips(self.video[:n], self.labels[:n], self.moving[:n])


def _digits() -> np.ndarray:
    from sklearn.datasets import load_digits

    return (load_digits().images / 16.0).astype(np.float32)


def num_classes(patterns: list[str] | tuple[str, ...]) -> int:
    return 8 + sum(p in patterns for p in EXTRA_PATTERNS)


def _trajectory(label: int, frames: int, room: int, speed: float, rng: np.random.Generator,
                extras: list[str]) -> np.ndarray:
    """Top-left corner (y, x) per frame, inside [0, room]."""
    f = np.arange(frames, dtype=np.float64)
    if label < 8:
        ang = label * math.pi / 4
        vy, vx = -math.sin(ang) * speed, math.cos(ang) * speed
        span_y, span_x = abs(vy) * (frames - 1), abs(vx) * (frames - 1)
        y0 = rng.uniform(0, room - span_y) + (span_y if vy < 0 else 0)
        x0 = rng.uniform(0, room - span_x) + (span_x if vx < 0 else 0)
        return np.stack([y0 + vy * f, x0 + vx * f], 1)
    kind = extras[label - 8]
    if kind == "circle":
        r = room / 3
        phase = rng.uniform(0, 2 * math.pi)
        a = phase + 2 * math.pi * f / frames
        return np.stack([room / 2 + r * np.sin(a), room / 2 + r * np.cos(a)], 1)
    if kind == "bounce":  # horizontal there and back
        y = rng.uniform(0, room)
        x = np.abs(((f * 2 * speed) % (2 * room)) - room)
        return np.stack([np.full_like(f, y), x], 1)
    # stop-go: moves right only on alternate 4-frame windows
    y = rng.uniform(0, room)
    steps = ((f // 4) % 2 == 0).astype(float) * 2 * speed
    x = np.concatenate([[0.0], np.cumsum(steps[:-1])])
    x = rng.uniform(0, max(room - x[-1], 0)) + x
    return np.stack([np.full_like(f, y), np.clip(x, 0, room)], 1)


def make_clips(n: int, seed: int, *, frames: int = 16, size: int = 32, speed: float = 1.5,
               noise: float = 0.02, patterns: list[str] | tuple[str, ...] = ("directions",),
               pan_speed: float = 0.0, flicker: float = 0.0, background: float = 0.35,
               distractor: float = 0.8, label: int | None = None) -> Clips:
    """`n` seeded clips. pan_speed > 0: a global camera pan of that many pixels per frame in a random
    direction per clip; flicker > 0: brightness × (1 + flicker·sin(·)) per frame; `label` forces
    every clip's class (for the notebook's explorer)."""
    rng = np.random.default_rng(seed)
    digits = _digits()
    extras = [p for p in EXTRA_PATTERNS if p in patterns]
    k = num_classes(patterns)
    margin = int(math.ceil(pan_speed * (frames - 1))) + 1
    canvas = size + 2 * margin
    room = size - 8
    video = np.empty((n, frames, size, size), np.float32)
    moving = np.zeros((n, frames, size, size), bool)
    labels = rng.integers(0, k, size=n)
    if label is not None:
        labels[:] = label
    textures = gaussian_filter(rng.random((n, canvas, canvas), dtype=np.float32), sigma=(0, 1.5, 1.5))
    for i in range(n):
        tex = textures[i]
        tex = (tex - tex.min()) / (np.ptp(tex) + 1e-8) * background
        dy, dx = rng.integers(margin, margin + room + 1, size=2)
        dist = digits[rng.integers(len(digits))]
        tex[dy:dy + 8, dx:dx + 8] = np.maximum(tex[dy:dy + 8, dx:dx + 8], distractor * dist)
        ang = rng.uniform(0, 2 * math.pi)
        pan = np.array([math.sin(ang), math.cos(ang)]) * pan_speed
        digit = digits[rng.integers(len(digits))]
        path = np.rint(_trajectory(int(labels[i]), frames, room, speed, rng, extras)).astype(int)
        path = np.clip(path, 0, room)
        phase = rng.uniform(0, 2 * math.pi)
        for f in range(frames):
            oy, ox = np.rint(margin + pan * f).astype(int)
            oy, ox = np.clip([oy, ox], 0, 2 * margin)
            frame = tex[oy:oy + size, ox:ox + size].copy()
            y, x = path[f]
            frame[y:y + 8, x:x + 8] = np.maximum(frame[y:y + 8, x:x + 8], digit)
            moving[i, f, y:y + 8, x:x + 8] = digit > 0
            if flicker:
                frame *= 1 + flicker * math.sin(2 * math.pi * f / 4 + phase)
            video[i, f] = frame
    video += noise * rng.standard_normal(video.shape).astype(np.float32)
    video = np.clip(video, 0.0, 1.0)
    return Clips(torch.from_numpy(video).unsqueeze(1), torch.from_numpy(labels).long(), torch.from_numpy(moving))


def token_cover(moving: torch.Tensor, patch: int, tubelet: int) -> torch.Tensor:
    """Fraction of each tubelet token's pixels covered by the moving digit: [n, F, H, W] -> [n, N]."""
    n, f, h, w = moving.shape
    x = moving.float().reshape(n, f // tubelet, tubelet, h // patch, patch, w // patch, patch)
    return x.mean(dim=(2, 4, 6)).reshape(n, -1)
