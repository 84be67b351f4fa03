"""Full-profile video data: "path label" list files (UCF101 / HMDB51 / K400 style), decoded with
PyAV, sampled as in the official (VideoMAE) code:

- pre-training: one TSN segment with a random offset, `clip_len` frames at `stride`;
- fine-tune training: a random window of `clip_len·stride` frames, `clip_len` frames on a linspace
  over it, random-resized crop (scale 0.08-1, ratio 3/4-4/3) and horizontal flip;
- testing: `segments` uniformly spaced windows × 3 spatial crops of the short-side-resized video.

Clips are returned in [0, 1] as [C, F, H, W]; the model applies the ImageNet normalisation.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import Dataset


def read_list(list_file: str | Path, root: str | Path | None = None) -> list[tuple[Path, int]]:
    """Lines "path label" (whitespace-separated; the path may be relative to `root`)."""
    items = []
    for line in Path(list_file).read_text().splitlines():
        if not line.strip():
            continue
        path, label = line.rsplit(maxsplit=1)
        p = Path(path)
        items.append((p if root is None or p.is_absolute() else Path(root) / p, int(label)))
    return items


def decode_video(path: str | Path) -> np.ndarray:
    """All frames of a video as uint8 [F, H, W, 3] (PyAV, one thread)."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "SLICE"
        frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(stream)]
    if not frames:
        raise ValueError(f"no decodable frames in {path}")
    return np.stack(frames)


def pretrain_indices(num_frames: int, clip_len: int, stride: int, rng: np.random.Generator) -> np.ndarray:
    """One segment, random offset, `clip_len` frames `stride` apart (clamped to the last frame)."""
    span = clip_len * stride
    offset = int(rng.integers(0, num_frames - span + 1)) if num_frames >= span else 0
    return np.minimum(offset + np.arange(clip_len) * stride, num_frames - 1)


def train_indices(num_frames: int, clip_len: int, stride: int, rng: np.random.Generator) -> np.ndarray:
    """A random window of clip_len·stride frames, `clip_len` frames on a linspace over it."""
    span = clip_len * stride
    if num_frames <= span:
        return np.minimum(np.linspace(0, num_frames - 1, clip_len).astype(int), num_frames - 1)
    end = int(rng.integers(span, num_frames + 1))
    return np.clip(np.linspace(end - span, end, clip_len).astype(int), end - span, end - 1)


def test_indices(num_frames: int, clip_len: int, stride: int, segments: int) -> list[np.ndarray]:
    """`segments` windows evenly spaced over the video."""
    span = clip_len * stride
    starts = np.linspace(0, max(num_frames - span, 0), segments).round().astype(int)
    return [np.minimum(s + np.arange(clip_len) * stride, num_frames - 1) for s in starts]


def _to_tensor(frames: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(frames).permute(3, 0, 1, 2).float() / 255.0  # [C, F, H, W]


def resize_short(video: torch.Tensor, size: int) -> torch.Tensor:
    c, f, h, w = video.shape
    scale = size / min(h, w)
    out = (max(size, round(h * scale)), max(size, round(w * scale)))
    return F.interpolate(video.permute(1, 0, 2, 3), size=out, mode="bilinear", align_corners=False).permute(1, 0, 2, 3)


def three_crops(video: torch.Tensor, size: int) -> list[torch.Tensor]:
    """Start / centre / end square crops along the long side of a short-side-resized video."""
    _, _, h, w = video.shape
    if w >= h:
        xs = [0, (w - size) // 2, w - size]
        return [video[..., (h - size) // 2:(h - size) // 2 + size, x:x + size] for x in xs]
    ys = [0, (h - size) // 2, h - size]
    return [video[..., y:y + size, (w - size) // 2:(w - size) // 2 + size] for y in ys]


def random_resized_crop(video: torch.Tensor, size: int, rng: np.random.Generator,
                        scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), flip: bool = True) -> torch.Tensor:
    _, _, h, w = video.shape
    for _ in range(10):
        area = h * w * rng.uniform(*scale)
        r = math.exp(rng.uniform(math.log(ratio[0]), math.log(ratio[1])))
        cw, ch = int(round(math.sqrt(area * r))), int(round(math.sqrt(area / r)))
        if 0 < cw <= w and 0 < ch <= h:
            y, x = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
            break
    else:
        ch = cw = min(h, w)
        y, x = (h - ch) // 2, (w - cw) // 2
    crop = video[..., y:y + ch, x:x + cw].permute(1, 0, 2, 3)
    crop = F.interpolate(crop, size=(size, size), mode="bilinear", align_corners=False).permute(1, 0, 2, 3)
    if flip and rng.random() < 0.5:
        crop = crop.flip(-1)
    return crop


class VideoListDataset(Dataset):
    """mode: "pretrain" (multi-scale crop only), "train" (fine-tune augmentation) or "test"
    (returns [segments·3, C, F, size, size] views). Item: (video, label)."""

    def __init__(self, list_file, root=None, *, mode: str = "pretrain", clip_len: int = 16, stride: int = 4,
                 size: int = 224, segments: int = 5, seed: int = 0, flip: bool = True):
        self.items = read_list(list_file, root)
        self.mode, self.clip_len, self.stride, self.size = mode, clip_len, stride, size
        self.segments, self.seed, self.flip, self.epoch = segments, seed, flip, 0

    def __len__(self) -> int:
        return len(self.items)

    def batch(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Decode and stack the items `idx` (the batch interface the training loops use)."""
        items = [self[int(i)] for i in idx]
        return torch.stack([x for x, _ in items]), torch.tensor([y for _, y in items])

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __getitem__(self, i: int):
        path, label = self.items[i]
        frames = decode_video(path)
        rng = np.random.default_rng([self.seed, self.epoch, i])
        n = len(frames)
        if self.mode == "test":
            views = []
            for idx in test_indices(n, self.clip_len, self.stride, self.segments):
                views += three_crops(resize_short(_to_tensor(frames[idx]), self.size), self.size)
            return torch.stack(views), label
        if self.mode == "pretrain":
            clip = _to_tensor(frames[pretrain_indices(n, self.clip_len, self.stride, rng)])
            return random_resized_crop(clip, self.size, rng, scale=(0.66, 1.0), ratio=(1.0, 1.0), flip=self.flip), label
        clip = _to_tensor(frames[train_indices(n, self.clip_len, self.stride, rng)])
        return random_resized_crop(clip, self.size, rng, flip=self.flip), label


def write_test_video(path: str | Path, frames: np.ndarray, fps: int = 25) -> Path:
    """Write uint8 [F, H, W, 3] frames as an MPEG-4 file (used by the tests)."""
    import av

    path = Path(path)
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("mpeg4", rate=fps)
        stream.width, stream.height, stream.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p"
        stream.bit_rate = 20_000_000
        for frame in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path
