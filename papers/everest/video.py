"""Full-profile video data: split lists (UCF101's official split files, or "path label" lists as for
HMDB51 / K400), decoded with PyAV, sampled as in the official (VideoMAE) code:

- pre-training: one TSN segment with a random offset, `clip_len` frames at `stride`;
- fine-tune training: a random window of `clip_len·stride` frames, `clip_len` frames on a linspace
  over it, random-resized crop (scale 0.08-1, ratio 3/4-4/3) and horizontal flip;
- testing: `segments` uniformly spaced windows × 3 spatial crops of the short-side-resized video.

Only the sampled frames are decoded (`VideoReader`: seek to the keyframe before them, decode forward to
the last one), as decord's `get_batch` does in the official code. Clips are returned in [0, 1] as
[C, F, H, W]; the model applies the ImageNet normalisation.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

from shared.config import ConfigError


class ListFormatError(ConfigError):
    """A split list or class index that the config points at does not read as its format says."""


def read_class_index(path: str | Path) -> dict[str, int]:
    """UCF101's classInd.txt (lines "1 ApplyEyeMakeup", 1-based) -> {class folder: 0-based label}."""
    classes = {}
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2 or not parts[0].isdigit():
            raise ListFormatError(f"{path}:{number}: expected '<1-based index> <class folder>', got {line.strip()!r}")
        classes[parts[1]] = int(parts[0]) - 1
    return classes


def read_list(list_file: str | Path, root: str | Path | None = None,
              class_index: str | Path | None = None) -> list[tuple[Path, int]]:
    """(video path, 0-based label) of every line of a split list; relative paths are under `root`.

    Without `class_index`: lines "path label", the label as written (0-based; the HMDB51/K400-style
    lists of the official code). With UCF101's classInd.txt: the official split files, trainlist0N.txt
    ("ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi 1", 1-based) and testlist0N.txt (the path alone);
    the label is the class of the path's folder, and a written label must agree with it."""
    classes = None if class_index is None else read_class_index(class_index)
    items = []
    for number, line in enumerate(Path(list_file).read_text().splitlines(), 1):
        line = line.strip()             # splitlines also ends the official files' CRLF lines
        if not line:
            continue
        parts = line.rsplit(maxsplit=1)
        labelled = len(parts) == 2 and parts[1].lstrip("-").isdigit()
        if classes is None:
            if not labelled:
                raise ListFormatError(f"{list_file}:{number}: expected 'path label', got {line!r} (UCF101's testlist "
                                      f"files have no label: point data.class_index at its classInd.txt)")
            path, label = parts[0], int(parts[1])
        else:
            path, written = (parts[0], int(parts[1])) if labelled else (line, None)
            folder = Path(path).parent.name
            if folder not in classes:
                raise ListFormatError(f"{list_file}:{number}: class folder {folder!r} of {path!r} is not in {class_index}")
            label = classes[folder]
            if written is not None and written - 1 != label:
                raise ListFormatError(f"{list_file}:{number}: label {written} (1-based) of {path!r} disagrees with "
                                      f"{class_index}, which numbers {folder!r} {label + 1}")
        p = Path(path)
        items.append((p if root is None or p.is_absolute() else Path(root) / p, label))
    return items


def decode_video(path: str | Path) -> np.ndarray:
    """All frames of a video as uint8 [F, H, W, 3] (PyAV, one thread): the reference `VideoReader` matches."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "SLICE"
        frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(stream)]
    if not frames:
        raise ValueError(f"no decodable frames in {path}")
    return np.stack(frames)


class _IndexDisagrees(Exception):
    """Decoding does not follow the demuxed timestamps; the reader falls back to a full decode."""


class VideoReader:
    """A video opened with PyAV that decodes only the frames asked for.

    Opening demuxes the stream once without decoding: every frame's presentation timestamp (frame i
    is the i-th in presentation order, as in a full decode) and which frames are keyframes.
    `frames(indices)` seeks to the last keyframe at or before the first wanted frame, decodes forward
    only up to the last wanted one, keeps the wanted ones, and seeks again when the next wanted frame
    lies past another keyframe. Where the file's timestamps cannot be trusted (a packet or frame
    without one, a frame the index does not list, a gap, a seek past its target, a stream that ends
    early), the whole video is decoded instead and the indices are clamped to the frames it has.
    `decoded` counts the frames decoded so far."""

    def __init__(self, path: str | Path):
        import av

        self.path = Path(path)
        self.container = av.open(str(path))
        self.stream = self.container.streams.video[0]
        self.stream.thread_type = "SLICE"
        self.decoded = 0
        self._all: np.ndarray | None = None
        timestamps, keyframe = [], []
        for packet in self.container.demux(self.stream):
            if packet.size == 0:            # the demuxer's closing empty packets (and empty AVI chunks)
                continue
            timestamps.append(packet.pts)
            keyframe.append(packet.is_keyframe)
        if not timestamps or any(t is None for t in timestamps) or len(set(timestamps)) < len(timestamps):
            self._decode_all()
            self.num_frames = len(self._all)
            return
        order = np.argsort(np.asarray(timestamps, dtype=np.int64), kind="stable")
        self.pts = np.asarray(timestamps, dtype=np.int64)[order]
        self.keyframes = np.flatnonzero(np.asarray(keyframe, dtype=bool)[order])
        self.index_of = {int(t): i for i, t in enumerate(self.pts)}
        self.num_frames = len(self.pts)

    def __len__(self) -> int:
        return self.num_frames

    def __enter__(self) -> "VideoReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.container.close()

    def _decode_all(self) -> None:
        self._all = decode_video(self.path)
        self.decoded += len(self._all)

    def _keyframe_before(self, index: int) -> int:
        """The last keyframe at or before frame `index` (frame 0 if none is marked)."""
        at = int(np.searchsorted(self.keyframes, index, side="right")) - 1
        return int(self.keyframes[at]) if at >= 0 else 0

    def _seek_and_decode(self, wanted: list[int]) -> dict[int, np.ndarray]:
        """Frames `wanted` (ascending, distinct) by seeking to keyframes and decoding forward."""
        got, pending = {}, list(wanted)
        while pending:
            target = pending[0]
            self.container.seek(int(self.pts[self._keyframe_before(target)]), backward=True, any_frame=False,
                                stream=self.stream)
            previous = None
            for frame in self.container.decode(self.stream):
                self.decoded += 1
                index = self.index_of.get(frame.pts)
                if index is None or (previous is None and index > target) or (
                        previous is not None and index != previous + 1):
                    raise _IndexDisagrees
                previous = index
                if index == pending[0]:
                    got[index] = frame.to_ndarray(format="rgb24")
                    pending.pop(0)
                    if not pending or self._keyframe_before(pending[0]) > index + 1:
                        break                 # done, or the next wanted frame is cheaper to seek to
            else:
                raise _IndexDisagrees         # the stream ended before the wanted frames
        return got

    def frames(self, indices) -> np.ndarray:
        """Frames `indices` (any order, repeats allowed) as uint8 [len(indices), H, W, 3]."""
        indices = np.asarray(indices, dtype=np.int64)
        if len(indices) and (indices.min() < 0 or indices.max() >= self.num_frames):
            raise IndexError(f"frames {indices.min()}..{indices.max()} asked of the {self.num_frames} frames of {self.path}")
        if self._all is None:
            try:
                got = self._seek_and_decode(sorted(set(indices.tolist())))
                return np.stack([got[int(i)] for i in indices])
            except _IndexDisagrees:
                self._decode_all()
        return self._all[np.minimum(indices, len(self._all) - 1)]


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
    (returns [segments·3, C, F, size, size] views). Item: (video, label). `class_index`: UCF101's
    classInd.txt, for its official split files (see `read_list`)."""

    keyed_by_draw = True   # `batch(idx, draws)`: augmentation per training draw (modules.DrawBatchSampler)

    def __init__(self, list_file, root=None, *, mode: str = "pretrain", clip_len: int = 16, stride: int = 4,
                 size: int = 224, segments: int = 5, seed: int = 0, flip: bool = True, class_index=None):
        self.items = read_list(list_file, root, class_index)
        self.mode, self.clip_len, self.stride, self.size = mode, clip_len, stride, size
        self.segments, self.seed, self.flip, self.epoch = segments, seed, flip, 0

    def __len__(self) -> int:
        return len(self.items)

    def batch(self, idx: torch.Tensor, draws=None) -> tuple[torch.Tensor, torch.Tensor]:
        """Decode and stack the items `idx` (the batch interface the training loops use). `draws`: one
        number per item, the draw's place in the training (`modules.DrawBatchSampler`); each item's
        window, crop and flip then come from (seed, epoch, draw, index), so two draws of one video
        differ. Without `draws`, from (seed, epoch, index)."""
        keys = [None] * len(idx) if draws is None else [int(d) for d in draws]
        items = [self.item(int(i), d) for i, d in zip(idx, keys)]
        return torch.stack([x for x, _ in items]), torch.tensor([y for _, y in items])

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __getitem__(self, i: int):
        return self.item(i)

    def item(self, i: int, draw: int | None = None):
        """Item `i`; its augmentation from (seed, epoch, i), or (seed, epoch, draw, i) for a training draw."""
        path, label = self.items[i]
        rng = np.random.default_rng([self.seed, self.epoch, i] if draw is None else [self.seed, self.epoch, draw, i])
        with VideoReader(path) as video:
            n = len(video)
            if self.mode == "test":
                windows = test_indices(n, self.clip_len, self.stride, self.segments)
                frames = video.frames(np.concatenate(windows))
                views = []
                for w in range(len(windows)):
                    clip = _to_tensor(frames[w * self.clip_len:(w + 1) * self.clip_len])
                    views += three_crops(resize_short(clip, self.size), self.size)
                return torch.stack(views), label
            if self.mode == "pretrain":
                clip = _to_tensor(video.frames(pretrain_indices(n, self.clip_len, self.stride, rng)))
                return random_resized_crop(clip, self.size, rng, scale=(0.66, 1.0), ratio=(1.0, 1.0), flip=self.flip), label
            clip = _to_tensor(video.frames(train_indices(n, self.clip_len, self.stride, rng)))
        return random_resized_crop(clip, self.size, rng, flip=self.flip), label


def write_test_video(path: str | Path, frames: np.ndarray, fps: int = 25, gop_size: int = 12,
                     b_frames: int = 0) -> Path:
    """Write uint8 [F, H, W, 3] frames as MPEG-4 Part 2 video, a keyframe every `gop_size` frames and up
    to `b_frames` B-frames between references; the container follows the suffix (.mp4, .avi). Used by
    the tests and the rehearsal assets."""
    import av

    path = Path(path)
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("mpeg4", rate=fps)
        stream.width, stream.height, stream.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p"
        stream.bit_rate = 20_000_000
        stream.codec_context.gop_size = gop_size
        stream.codec_context.max_b_frames = b_frames
        for index, frame in enumerate(frames):
            picture = av.VideoFrame.from_ndarray(frame, format="rgb24")
            picture.pts = index
            for packet in stream.encode(picture):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path
