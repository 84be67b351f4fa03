"""Procedural clips, frame selection and the PyAV video loader (on a video the test writes)."""
import math

import numpy as np
import pytest
import torch

from papers.everest.data import make_clips, num_classes, token_cover
from papers.everest.model import TubeletEmbed
from papers.everest.selection import frame_pair_probabilities, information_intensive_frames, select_frame_pairs


def test_clips_deterministic_and_shaped():
    a, b, c = make_clips(6, 3), make_clips(6, 3), make_clips(6, 4)
    assert a.video.shape == (6, 1, 16, 32, 32) and a.moving.shape == (6, 16, 32, 32)
    assert torch.equal(a.video, b.video) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.video, c.video)
    assert 0 <= float(a.video.min()) and float(a.video.max()) <= 1
    assert num_classes(["directions", "circle", "bounce", "stopgo"]) == 11


def test_label_is_motion_direction():
    clips = make_clips(40, 0, noise=0.0)
    for i in range(40):
        ys, xs = [], []
        for f in (0, 15):
            yy, xx = clips.moving[i, f].nonzero(as_tuple=True)
            ys.append(yy.float().mean())
            xs.append(xx.float().mean())
        dy, dx = float(ys[1] - ys[0]), float(xs[1] - xs[0])
        ang = clips.labels[i].item() * math.pi / 4
        cos = (dx * math.cos(ang) - dy * math.sin(ang)) / math.hypot(dx, dy)
        assert cos > 0.9, (i, clips.labels[i], dx, dy)


def test_static_scene_except_digit_and_pan_moves_everything():
    clean = make_clips(8, 1, noise=0.0)
    static = ~(clean.moving[:, 1:] | clean.moving[:, :-1])
    diff = (clean.video[:, 0, 1:] - clean.video[:, 0, :-1]).abs()
    assert float(diff[static].max()) < 1e-6
    pan = make_clips(8, 1, noise=0.0, pan_speed=1.0)
    static = ~(pan.moving[:, 1:] | pan.moving[:, :-1])
    assert float((pan.video[:, 0, 1:] - pan.video[:, 0, :-1]).abs()[static].mean()) > 1e-3
    harder = make_clips(30, 2, patterns=["directions", "circle", "bounce", "stopgo"])
    assert int(harder.labels.max()) > 7


def test_token_cover():
    moving = torch.zeros(1, 4, 16, 16, dtype=torch.bool)
    moving[0, 0:2, 0:8, 0:4] = True
    cover = token_cover(moving, 8, 2)
    assert cover.shape == (1, 2 * 4) and cover[0, 0] == 0.5 and cover[0, 1:].sum() == 0


def test_frame_pair_probabilities():
    scores = torch.zeros(4, 5)                 # 4 candidate pairs × 5 positions; top-⌊0.3·20⌋ = 6 tokens
    scores[0, :3] = 5.0
    scores[2, :2] = 4.0
    scores[3, 0] = 3.0
    probs = frame_pair_probabilities(scores, 0.3)
    torch.testing.assert_close(probs, torch.tensor([3 / 6, 0, 2 / 6, 1 / 6]))
    gen = torch.Generator().manual_seed(0)
    first = torch.stack([select_frame_pairs(scores, 1, 0.3, gen) for _ in range(3000)]).flatten()
    freq = torch.bincount(first, minlength=4).float() / 3000
    assert torch.allclose(freq, probs, atol=0.03)
    for _ in range(20):                         # zero-count pairs are drawn only after the others
        assert select_frame_pairs(scores, 3, 0.3, gen).tolist() == [0, 2, 3]
    assert select_frame_pairs(scores, 4, 0.3, gen).tolist() == [0, 1, 2, 3]


def test_information_intensive_frames_prefers_motion():
    video = torch.full((1, 24, 32, 32), 0.3)   # 12 candidate pairs; motion only in frames 8-15
    for f in range(8, 16):
        video[0, f, 8:16, 2 * f - 10:2 * f - 2] = 1.0
    torch.manual_seed(0)
    embed = TubeletEmbed(1, 16, patch=8, tubelet=2)
    out = information_intensive_frames(video, embed, num_pairs=4, rho_pre=0.1, generator=torch.Generator().manual_seed(0))
    assert out.shape == (1, 8, 32, 32)
    chosen = [f for f in range(24) if any(torch.equal(out[0, j], video[0, f]) for j in range(8))]
    assert all(6 <= f <= 15 for f in chosen if not torch.equal(video[0, f], video[0, 0]))


def test_video_loader_on_written_video(tmp_path):
    pytest.importorskip("av")
    from papers.everest.video import (VideoListDataset, decode_video, pretrain_indices, test_indices,
                                      train_indices, write_test_video)

    frames = np.zeros((40, 48, 64, 3), np.uint8)
    for f in range(40):
        frames[f, :, :, :] = 5 * f + 20        # brightness encodes the frame index
    path = write_test_video(tmp_path / "clip.mp4", frames)
    decoded = decode_video(path)
    assert decoded.shape == (40, 48, 64, 3)
    brightness = decoded.reshape(40, -1).mean(1)
    assert np.all(np.abs(brightness - (5 * np.arange(40) + 20)) < 2)

    rng = np.random.default_rng(0)
    idx = pretrain_indices(40, 8, 4, rng)
    assert len(idx) == 8 and np.all(np.diff(idx) == 4) and idx[-1] < 40
    assert list(pretrain_indices(10, 8, 4, rng)) == [0, 4, 8, 9, 9, 9, 9, 9]
    idx = train_indices(40, 8, 4, rng)
    assert len(idx) == 8 and np.all(np.diff(idx) >= 0) and idx[-1] - idx[0] <= 32
    segs = test_indices(40, 8, 4, 3)
    assert [s[0] for s in segs] == [0, 4, 8]

    (tmp_path / "list.txt").write_text("clip.mp4 3\n")
    test = VideoListDataset(tmp_path / "list.txt", tmp_path, mode="test", clip_len=8, stride=2, size=32, segments=2)
    views, label = test[0]
    assert views.shape == (6, 3, 8, 32, 32) and label == 3
    pre = VideoListDataset(tmp_path / "list.txt", tmp_path, mode="pretrain", clip_len=8, stride=4, size=32)
    clip, _ = pre[0]
    assert clip.shape == (3, 8, 32, 32) and 0 <= float(clip.min()) and float(clip.max()) <= 1
    # frames are taken in time order at the stride: brightness increases by about 4·5/255 per frame
    steps = clip.mean(dim=(0, 2, 3)).diff()
    assert torch.all((steps > 0.05) & (steps < 0.11))
    video, labels = VideoListDataset(tmp_path / "list.txt", tmp_path, mode="train", clip_len=8, size=32).batch(torch.tensor([0, 0]))
    assert video.shape == (2, 3, 8, 32, 32) and labels.tolist() == [3, 3]
