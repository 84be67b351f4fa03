"""Procedural moving-digit clips (tiny/smoke) and the tubelet-token ground truth of the moving digit.

A clip: 16 frames of 32×32 grayscale. A textured static background, one static distractor digit and
one moving digit (sklearn's bundled `load_digits`, 8×8), plus small Gaussian noise.

**The class is the appearance of the moving digit**: its intensity level (`appearance="intensity"`,
4 classes: peak brightness 0.4 / 0.6 / 0.8 / 1.0, random digit shape) or its identity
(`appearance="identity"`, 10 classes; too hard for the tiny model, see the README). The distractor
has another class's appearance, so a clip always shows two digits and only motion tells which one
carries the class: motion is the informative, non-redundant part of the clip. The motion itself (one
of 8 directions, optionally circle / bounce / stop-go) is a nuisance drawn independently of the class
and kept as `Clips.motion`. The keep mask of motion-score selection follows the trajectory, so it
should say nothing about the class (`leak.py` checks this with a linear probe), while it does say the
direction.

**The static-context knob** (`static_share` s, the share of the class's information that static
content carries): the class c of k = 4 splits into a scene part a = c // D, shown by the static
background, and a motion part d = c mod D, shown by the moving digit, with S = k^s scene values and
D = k/S motion values (s = 0, 0.5, 1: S = 1, 2, 4). The scene is the background texture's
orientation (a·π/S: stripes of filtered noise); the moving digit's intensity level is
d·(k/D) + u with u uniform in [0, k/D), so it carries log₂ D bits and no more. s = 0 is the world
above, clip for clip (the knob's own draws come from a second stream per clip); at s = 1 the class
lives in the static background only and the moving digit's appearance is class-free.

Options: static stretches (`rest`: the moving digit rests during that fraction of the clip's 4-frame
windows, for information-intensive frame selection), a global camera pan (background and distractor
shift, the digit keeps its image motion, so every token moves) and flicker (global brightness
oscillation). Clip i depends only on (seed, i): `make_clips(n, s)` is the first n clips of
`make_clips(m, s)` for m > n.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.ndimage import convolve, gaussian_filter

EXTRA_PATTERNS = ("circle", "bounce", "stopgo")
INTENSITY_LEVELS = (0.4, 0.6, 0.8, 1.0)   # peak brightness of a digit, one per class (appearance="intensity")
APPEARANCES = ("intensity", "identity")
REST_WINDOW = 4             # frames per window of motion or rest
# data-config keys that describe the loader or the splits, not a clip (accepted so that
# `make_clips(n, seed, **cfg.data)` works)
LOADER_KEYS = ("source", "channels", "n_pretrain", "n_finetune", "n_test", "n_val", "mean", "std", "num_classes",
               "pretrain_list", "train_list", "test_list", "class_index", "root", "stride", "test_segments", "flip",
               "workers")


@dataclass
class Clips:
    video: torch.Tensor    # [n, 1, F, H, W] float32 in [0, 1]
    labels: torch.Tensor   # [n] int64: appearance class of the moving digit (intensity level or identity)
    moving: torch.Tensor   # [n, F, H, W] bool: pixels of the moving digit
    motion: torch.Tensor   # [n] int64: motion pattern (0-7 directions, 8+ extra patterns), a nuisance

    def __len__(self) -> int:
        return len(self.labels)

    def batch(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.video[idx], self.labels[idx]

    def subset(self, n: int) -> "Clips":
        return Clips(self.video[:n], self.labels[:n], self.moving[:n], self.motion[:n])


def _digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    d = load_digits()
    return (d.images / 16.0).astype(np.float32), d.target


def num_classes(appearance: str) -> int:
    """Number of classes: intensity levels or digit identities."""
    if appearance not in APPEARANCES:
        raise ValueError(f"appearance={appearance!r}; choose one of {APPEARANCES}")
    return len(INTENSITY_LEVELS) if appearance == "intensity" else 10


def num_motions(patterns: list[str] | tuple[str, ...]) -> int:
    """Number of motion patterns: 8 directions plus the extra patterns named in `patterns`."""
    return 8 + sum(p in patterns for p in EXTRA_PATTERNS)


def class_split(k: int, static_share: float) -> tuple[int, int]:
    """(S, D): scene values S = k^s carried by the static background and motion values D = k / S
    carried by the moving digit, for k classes and static share s (S must divide k)."""
    scenes = round(k ** static_share)
    if not 0.0 <= static_share <= 1.0 or abs(k ** static_share - scenes) > 1e-6 or k % scenes:
        raise ValueError(f"static_share={static_share} with {k} classes: k**static_share must be a whole divisor "
                         f"of k (for 4 classes: 0, 0.5 or 1)")
    return scenes, k // scenes


def oriented_texture(noise: np.ndarray, angle: float, along: float = 4.0, across: float = 0.8) -> np.ndarray:
    """White `noise` filtered by a Gaussian elongated along direction `angle` (radians from the x axis):
    stripes at that orientation (std `along` pixels along them, `across` across)."""
    r = int(math.ceil(3 * along))
    y, x = np.mgrid[-r:r + 1, -r:r + 1].astype(np.float32)
    u = x * math.cos(angle) - y * math.sin(angle)          # along the stripes (y points down)
    v = x * math.sin(angle) + y * math.cos(angle)
    kernel = np.exp(-0.5 * ((u / along) ** 2 + (v / across) ** 2))
    return convolve(noise, kernel / kernel.sum(), mode="wrap")


def motion_clock(frames: int, rest: float, rng: np.random.Generator) -> np.ndarray:
    """Motion time c(f) per frame: how many frame steps the digit has moved by frame f. With
    rest > 0, the digit rests during round(rest·W) randomly chosen 4-frame windows (at least one
    window moves)."""
    windows = -(-frames // REST_WINDOW)
    resting = min(int(round(rest * windows)), windows - 1)
    moves = np.ones(windows, bool)
    moves[rng.choice(windows, resting, replace=False)] = False
    advance = np.repeat(moves, REST_WINDOW)[:frames].astype(float)
    advance[0] = 0.0
    return np.cumsum(advance)


def _trajectory(motion: int, clock: np.ndarray, frames: int, room: int, speed: float,
                rng: np.random.Generator, extras: list[str]) -> np.ndarray:
    """Top-left corner (y, x) per frame, inside [0, room], at motion times `clock`."""
    c = clock
    if motion < 8:
        ang = motion * math.pi / 4
        vy, vx = -math.sin(ang) * speed, math.cos(ang) * speed
        span_y, span_x = abs(vy) * c[-1], abs(vx) * c[-1]
        y0 = rng.uniform(0, room - span_y) + (span_y if vy < 0 else 0)
        x0 = rng.uniform(0, room - span_x) + (span_x if vx < 0 else 0)
        return np.stack([y0 + vy * c, x0 + vx * c], 1)
    kind = extras[motion - 8]
    if kind == "circle":
        r = room / 3
        a = rng.uniform(0, 2 * math.pi) + 2 * math.pi * c / frames
        return np.stack([room / 2 + r * np.sin(a), room / 2 + r * np.cos(a)], 1)
    if kind == "bounce":  # horizontal there and back
        y = rng.uniform(0, room)
        x = np.abs(((c * 2 * speed) % (2 * room)) - room)
        return np.stack([np.full_like(c, y), x], 1)
    # stop-go: moves right only on alternate 4-frame windows of motion time
    y = rng.uniform(0, room)
    steps = ((np.floor(c) // 4) % 2 == 0).astype(float) * 2 * speed * (np.diff(c, prepend=0.0) > 0)
    x = np.cumsum(steps)
    x = rng.uniform(0, max(room - x[-1], 0)) + x
    return np.stack([np.full_like(c, y), np.clip(x, 0, room)], 1)


def make_clips(n: int, seed: int, *, frames: int = 16, size: int = 32, speed: float = 1.5,
               noise: float = 0.02, patterns: list[str] | tuple[str, ...] = ("directions",),
               appearance: str = "intensity", pan_speed: float = 0.0, flicker: float = 0.0, rest: float = 0.0,
               static_share: float = 0.0, background: float = 0.35, label: int | None = None,
               motion: int | None = None, **loader_keys) -> Clips:
    """`n` seeded clips; the keyword arguments are the `data` config section (loader keys ignored).

    pan_speed > 0: a global camera pan of that many pixels per frame in a random direction per clip;
    appearance: what the class is (intensity level or identity of the moving digit);
    flicker > 0: brightness × (1 + flicker·sin(·)) per frame; rest: fraction of 4-frame windows in
    which the moving digit rests; static_share: the static-context knob (module docstring; the
    class splits into the background's orientation and the moving digit's level); `label` /
    `motion` force every clip's class / motion pattern (for the notebook's explorer)."""
    unknown = sorted(set(loader_keys) - set(LOADER_KEYS))
    if unknown:
        raise TypeError(f"make_clips got unknown keys {unknown}; clip keys are frames, size, speed, noise, "
                        f"patterns, appearance, pan_speed, flicker, rest, static_share (and the data-config loader keys {list(LOADER_KEYS)})")
    images, identity = _digits()
    k = num_classes(appearance)
    scenes, values = class_split(k, static_share)
    by_class = [np.flatnonzero(identity == c) for c in range(10)]

    def digit_of(c: int, rng: np.random.Generator) -> np.ndarray:
        if appearance == "identity":
            return images[rng.choice(by_class[c])]
        return images[rng.integers(len(images))] * INTENSITY_LEVELS[c]

    extras = [p for p in EXTRA_PATTERNS if p in patterns]
    margin = int(math.ceil(pan_speed * (frames - 1))) + 1
    canvas = size + 2 * margin
    room = size - 8
    video = np.empty((n, frames, size, size), np.float32)
    moving = np.zeros((n, frames, size, size), bool)
    labels = np.empty(n, np.int64)
    motions = np.empty(n, np.int64)
    steps = np.arange(frames, dtype=float)                 # frame index f, as the camera's pan · f
    frame_idx, grid = np.arange(frames)[:, None, None], np.arange(8)
    for i in range(n):
        rng = np.random.default_rng([seed, i])
        labels[i] = rng.integers(k) if label is None else label
        motions[i] = rng.integers(num_motions(patterns)) if motion is None else motion
        level = labels[i]                                            # the moving digit's appearance
        if scenes > 1:   # the knob's draws: a second stream, so s = 0 is the plain world clip for clip
            knob_rng = np.random.default_rng([seed, i, 1])
            level = (labels[i] % values) * (k // values) + knob_rng.integers(k // values)
        other = (level + 1 + rng.integers(k - 1)) % k                # the distractor: any other appearance
        digit, dist = digit_of(level, rng), digit_of(other, rng)
        noise_field = rng.random((canvas, canvas), dtype=np.float32)
        if scenes > 1:   # the scene part of the class: the background's orientation
            tex = oriented_texture(noise_field, math.pi * (labels[i] // values) / scenes)
        else:
            tex = gaussian_filter(noise_field, sigma=1.5)
        tex = (tex - tex.min()) / (np.ptp(tex) + 1e-8) * background
        dy, dx = rng.integers(margin, margin + room + 1, size=2)
        tex[dy:dy + 8, dx:dx + 8] = np.maximum(tex[dy:dy + 8, dx:dx + 8], dist)
        ang = rng.uniform(0, 2 * math.pi)
        pan = np.array([math.sin(ang), math.cos(ang)]) * pan_speed
        clock = motion_clock(frames, rest, rng)
        path = np.rint(_trajectory(int(motions[i]), clock, frames, room, speed, rng, extras)).astype(int)
        path = np.clip(path, 0, room)
        phase = rng.uniform(0, 2 * math.pi)
        # the frames at once: the camera's crop of the background, then the digit on top (the max of the two)
        offsets = np.clip(np.rint(margin + pan[None, :] * steps[:, None]).astype(int), 0, 2 * margin)
        if pan_speed:
            clip = np.stack([tex[oy:oy + size, ox:ox + size] for oy, ox in offsets])
        else:
            clip = np.broadcast_to(tex[offsets[0, 0]:offsets[0, 0] + size, offsets[0, 1]:offsets[0, 1] + size],
                                   (frames, size, size)).copy()
        rows, cols = path[:, 0, None, None] + grid[None, :, None], path[:, 1, None, None] + grid[None, None, :]
        clip[frame_idx, rows, cols] = np.maximum(clip[frame_idx, rows, cols], digit)
        moving[i][frame_idx, rows, cols] = digit > 0
        if flicker:
            clip *= np.array([1 + flicker * math.sin(2 * math.pi * f / 4 + phase) for f in range(frames)],
                             np.float32)[:, None, None]
        video[i] = clip
        video[i] += noise * rng.standard_normal(video[i].shape).astype(np.float32)
    np.clip(video, 0.0, 1.0, out=video)
    return Clips(torch.from_numpy(video).unsqueeze(1), torch.from_numpy(labels), torch.from_numpy(moving),
                 torch.from_numpy(motions))


def token_cover(moving: torch.Tensor, patch: int, tubelet: int) -> torch.Tensor:
    """Fraction of each tubelet token's pixels covered by the moving digit: [n, F, H, W] -> [n, N]."""
    n, f, h, w = moving.shape
    x = moving.float().reshape(n, f // tubelet, tubelet, h // patch, patch, w // patch, patch)
    return x.mean(dim=(2, 4, 6)).reshape(n, -1)
