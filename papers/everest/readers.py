"""Training-free readers of the procedural clips: the references of the static-context knob.

Each reader decodes the class from the world's known encoding (`data.py`): the moving digit's
intensity level (nearest of `INTENSITY_LEVELS` to a brightest pixel) and, when the static background
carries part of the class, the background's orientation (the structure tensor of the clip's
per-pixel temporal median, nearest of the S scene angles a·π/S).

- **motion-gated** (the ceiling, a diagnostic): the level from the brightest pixel among those that
  change between consecutive frames, so only the moving digit is read (the distractor is static);
  together with the background's orientation it reads every bit the world puts in the clip.
- **motion-blind** (a floor): the level from the brightest pixel of frame 0, which is the moving
  digit or the static distractor, whichever is brighter, plus the same background orientation: what
  a single-frame reader gets, the analogue of a scene classifier on one frame of UCF101.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .data import INTENSITY_LEVELS, class_split

CHANGE = 0.15   # a pixel moves when consecutive frames differ by more than this (noise: std 0.02 per frame)


def _nearest_level(peak: torch.Tensor) -> torch.Tensor:
    levels = torch.tensor(INTENSITY_LEVELS)
    return (peak.unsqueeze(-1) - levels).abs().argmin(-1)


def moving_level(video: torch.Tensor) -> torch.Tensor:
    """[n, 1, F, H, W] -> [n] level index from the brightest pixel that changes between frames."""
    v = video[:, 0]
    changed = (v[:, 1:] - v[:, :-1]).abs() > CHANGE
    bright = torch.maximum(v[:, 1:], v[:, :-1]).masked_fill(~changed, 0.0)
    return _nearest_level(bright.flatten(1).max(1).values)


def frame0_level(video: torch.Tensor) -> torch.Tensor:
    """[n, 1, F, H, W] -> [n] level index from the brightest pixel of the first frame."""
    return _nearest_level(video[:, 0, 0].flatten(1).max(1).values)


def scene_index(video: torch.Tensor, scenes: int) -> torch.Tensor:
    """[n, 1, F, H, W] -> [n] the background's orientation as the nearest of `scenes` angles a·π/S."""
    if scenes == 1:
        return torch.zeros(len(video), dtype=torch.long)
    still = video[:, 0].median(dim=1).values.numpy()                  # [n, H, W]: the static content
    gy, gx = np.gradient(still, axis=(1, 2))
    jxx, jyy, jxy = (gx * gx).sum((1, 2)), (gy * gy).sum((1, 2)), (gx * gy).sum((1, 2))
    gradient = 0.5 * np.arctan2(2 * jxy, jxx - jyy)                    # dominant gradient direction
    stripes = -(gradient + math.pi / 2)                                # stripes run across it (y down)
    angles = np.pi * np.arange(scenes) / scenes
    dist = np.abs(((stripes[:, None] - angles[None, :]) + math.pi / 2) % math.pi - math.pi / 2)
    return torch.from_numpy(dist.argmin(1))


def read_class(video: torch.Tensor, static_share: float, motion_gated: bool) -> torch.Tensor:
    """[n] predicted class of the intensity world at `static_share`: scene part a from the background,
    motion part d = level // (k / D) from the moving (`motion_gated`) or the frame-0 brightest digit."""
    k = len(INTENSITY_LEVELS)
    scenes, values = class_split(k, static_share)
    level = moving_level(video) if motion_gated else frame0_level(video)
    return scene_index(video, scenes) * values + level // (k // values)


def reader_accuracy(clips, static_share: float, motion_gated: bool) -> float:
    """Top-1 (%) of a reader on `clips` (the intensity world)."""
    pred = read_class(clips.video, static_share, motion_gated)
    return 100.0 * float((pred == clips.labels).float().mean())
