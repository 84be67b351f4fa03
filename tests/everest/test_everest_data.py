"""Procedural clips, frame selection and the PyAV video loader (on a video the test writes)."""
import math

import numpy as np
import pytest
import torch

from pathlib import Path

from papers.everest.data import INTENSITY_LEVELS, make_clips, num_classes, num_motions, token_cover
from papers.everest.model import TubeletEmbed
from papers.everest.selection import (frame_pair_probabilities, information_intensive_frames,
                                      information_intensive_pairs, select_frame_pairs, uniform_frame_pairs)
from shared.config import load_config

CONFIG = Path(__file__).resolve().parents[2] / "papers" / "everest" / "config.yaml"


def test_clips_deterministic_and_shaped():
    a, b, c = make_clips(6, 3), make_clips(6, 3), make_clips(6, 4)
    assert a.video.shape == (6, 1, 16, 32, 32) and a.moving.shape == (6, 16, 32, 32)
    assert torch.equal(a.video, b.video) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.video, c.video)
    assert 0 <= float(a.video.min()) and float(a.video.max()) <= 1
    assert num_motions(["directions", "circle", "bounce", "stopgo"]) == 11
    longer = make_clips(10, 3)                       # clip i depends on (seed, i) only
    assert torch.equal(longer.video[:6], a.video) and torch.equal(longer.motion[:6], a.motion)


def test_make_clips_takes_the_data_config():
    cfg = load_config(CONFIG, "tiny")
    clips = make_clips(4, 0, **cfg.data)
    assert clips.video.shape == (4, 1, cfg.data.frames, cfg.data.size, cfg.data.size)
    assert clips.labels.dtype == torch.int64 and int(clips.labels.max()) < num_classes(cfg.data.appearance)
    with pytest.raises(TypeError, match="unknown keys"):
        make_clips(2, 0, sped=2.0)


def test_motion_is_the_nuisance_direction_and_class_is_independent():
    clips = make_clips(40, 0, noise=0.0)
    for i in range(40):
        ys, xs = [], []
        for f in (0, 15):
            yy, xx = clips.moving[i, f].nonzero(as_tuple=True)
            ys.append(yy.float().mean())
            xs.append(xx.float().mean())
        dy, dx = float(ys[1] - ys[0]), float(xs[1] - xs[0])
        ang = clips.motion[i].item() * math.pi / 4
        cos = (dx * math.cos(ang) - dy * math.sin(ang)) / math.hypot(dx, dy)
        assert cos > 0.9, (i, clips.motion[i], dx, dy)
    many = make_clips(800, 1, noise=0.0)
    table = torch.zeros(num_classes("intensity"), 8)
    table.index_put_((many.labels, many.motion), torch.ones(800), accumulate=True)
    expected = table.sum(1, keepdim=True) * table.sum(0, keepdim=True) / 800
    chi2 = float(((table - expected) ** 2 / expected).sum())
    assert chi2 < 55                                   # 21 dof: p ≈ 0.0001 at 55; class-driven motion gives > 2000


def test_moving_digit_has_the_class_intensity_and_the_distractor_another():
    clips = make_clips(30, 5, noise=0.0, background=0.0)
    distinct = at_level = 0
    for i in range(30):
        level = INTENSITY_LEVELS[int(clips.labels[i])]
        video, moving = clips.video[i, 0], clips.moving[i]
        peaks = torch.stack([video[f][moving[f]].max() for f in range(16)])
        assert float(peaks.min()) <= level + 1e-6 or float(peaks.median()) > level   # max() with the distractor
        at_level += 0.7 * level <= float(peaks.median()) <= level + 1e-6   # most frames are away from it
        static = video[0][~moving.any(0)]                                  # never covered by the moving digit
        distinct += not math.isclose(float(static.max()), level, abs_tol=0.05)
    assert distinct >= 27 and at_level >= 27                               # the distractor shows another level


def test_moving_digit_has_the_class_identity():
    from sklearn.datasets import load_digits

    images, identity = load_digits(return_X_y=True)
    images = images.reshape(-1, 8, 8) / 16.0
    clips = make_clips(20, 5, noise=0.0, background=0.0, appearance="identity")
    matched = 0
    for i in range(20):
        yy, xx = clips.moving[i, 0].nonzero(as_tuple=True)
        y0, x0 = int(yy.min()), int(xx.min())
        patch = clips.video[i, 0, 0].numpy()
        # the digit images whose nonzero pixels sit at (y0, x0) in frame 0 (none where the distractor overlaps)
        fits = [k for k in range(len(images)) if images[k].any() and _place(images[k], patch, y0, x0)]
        assert all(identity[k] == clips.labels[i] for k in fits), (i, clips.labels[i], identity[fits])
        matched += bool(fits)
    assert matched >= 15


def _place(image, frame, y0, x0):
    ys, xs = image.nonzero()
    oy, ox = y0 - ys.min(), x0 - xs.min()
    if oy < 0 or ox < 0 or oy + 8 > frame.shape[0] or ox + 8 > frame.shape[1]:
        return False
    return np.allclose(frame[oy:oy + 8, ox:ox + 8], image, atol=1e-6)


def test_rest_windows_hold_the_digit_still():
    clips = make_clips(10, 2, frames=24, rest=0.5, noise=0.0)
    moved = (clips.moving[:, 1:] != clips.moving[:, :-1]).flatten(2).any(-1)      # [n, 23] frame steps
    windows = moved.new_zeros(10, 24)
    windows[:, 1:] = moved
    per_window = windows.view(10, 6, 4)[:, :, 1:].any(-1)                          # did it move in window w?
    assert (per_window.sum(1) <= 3).all() and (per_window.sum(1) >= 2).all()


def test_keep_mask_does_not_carry_the_class_but_carries_the_motion():
    from papers.everest.leak import keep_masks, probe_accuracy

    train, test = make_clips(800, 11), make_clips(400, 12)
    for keep in (0.3, 0.6):
        x_train, x_test = keep_masks(train.video, keep, 8, 2), keep_masks(test.video, keep, 8, 2)
        motion = probe_accuracy(x_train, train.motion.numpy(), x_test, test.motion.numpy())
        label = probe_accuracy(x_train, train.labels.numpy(), x_test, test.labels.numpy())
        assert motion > 35.0, (keep, motion)          # chance 12.5: the probe can find what the mask holds
        assert label < 100 / num_classes("intensity") + 7.0, (keep, label)   # chance 25: not in the mask


def test_static_scene_except_digit_and_pan_moves_everything():
    clean = make_clips(8, 1, noise=0.0)
    static = ~(clean.moving[:, 1:] | clean.moving[:, :-1])
    diff = (clean.video[:, 0, 1:] - clean.video[:, 0, :-1]).abs()
    assert float(diff[static].max()) < 1e-6
    pan = make_clips(8, 1, noise=0.0, pan_speed=1.0)
    static = ~(pan.moving[:, 1:] | pan.moving[:, :-1])
    assert float((pan.video[:, 0, 1:] - pan.video[:, 0, :-1]).abs()[static].mean()) > 1e-3
    harder = make_clips(30, 2, patterns=["directions", "circle", "bounce", "stopgo"])
    assert int(harder.motion.max()) > 7


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


def motion_in_middle_pairs(noise: float = 0.0):
    """24 candidate frames (12 pairs) of a static scene; a square moves only in frames 8-15 (pairs 4-7)."""
    video = torch.full((1, 24, 32, 32), 0.3)
    for f in range(8, 16):
        video[0, f, 8:16, 2 * f - 10:2 * f - 2] = 1.0
    return video + noise * torch.randn(video.shape, generator=torch.Generator().manual_seed(1))


def test_information_intensive_frames_prefers_motion():
    torch.manual_seed(0)
    embed = TubeletEmbed(1, 16, patch=8, tubelet=2)
    video = motion_in_middle_pairs()
    out = information_intensive_frames(video, embed, num_pairs=4, rho_pre=0.1, generator=torch.Generator().manual_seed(0))
    assert out.shape == (1, 8, 32, 32)
    # pairs 4..8 score above zero (pair 8 differs from pair 7) and hold the top 5% of tokens; drawn 4 of
    # 12, the chosen pairs must be
    # among them far more often than a uniform draw (5/12 of the time) would allow
    for noise in (0.0, 0.01):
        video = motion_in_middle_pairs(noise)
        hits = []
        for seed in range(100):
            pairs = information_intensive_pairs(video, embed, 4, 0.05, torch.Generator().manual_seed(seed))
            hits += [4 <= p <= 8 for p in pairs.tolist()]
            uniform = uniform_frame_pairs(12, 4, torch.Generator().manual_seed(seed))
            assert uniform.tolist() == sorted(set(uniform.tolist()))
        assert sum(hits) / len(hits) > 0.95, (noise, sum(hits) / len(hits))


def test_uniform_selector_fails_the_motion_test():
    """The check above separates selectors: a uniform one hits the motion pairs 5/12 of the time."""
    hits = [4 <= p <= 8 for seed in range(100) for p in uniform_frame_pairs(12, 4, torch.Generator().manual_seed(seed)).tolist()]
    assert sum(hits) / len(hits) < 0.6


def test_exact_zero_ties_are_broken_at_random():
    scores = torch.zeros(6, 4)                 # a static clip: every score is an exact zero
    scores[5, 0] = 1.0
    probs = torch.stack([frame_pair_probabilities(scores, 0.25, torch.Generator().manual_seed(s)) for s in range(400)])
    # top-⌊0.25·24⌋ = 6 tokens: pair 5's scored token, then 5 tied zeros spread over all pairs
    assert (probs[:, 5] >= 1 / 6).all()
    mean = probs[:, :5].mean(0)
    assert torch.allclose(mean, torch.full((5,), mean.mean().item()), atol=0.03), mean  # lowest index first: [4/6, 1/6, 0, 0, 0]
    assert not torch.equal(probs[0], probs[1]) or not torch.equal(probs[1], probs[2])


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


@pytest.mark.parametrize("flip", [True, False])
def test_video_flip_follows_the_config(tmp_path, flip):
    """`data.flip` reaches the video loader: frames bright on the left stay bright on the left in every
    crop when it is off (a crop of scale ≥ 0.66 always spans both halves' edges); some crops mirror when on."""
    pytest.importorskip("av")
    from papers.everest.experiments import dataset
    from papers.everest.video import write_test_video

    frames = np.full((40, 48, 64, 3), 20, np.uint8)
    frames[:, :, :32] = 200
    write_test_video(tmp_path / "clip.mp4", frames)
    (tmp_path / "list.txt").write_text("clip.mp4 0\n")
    cfg = load_config(Path(__file__).resolve().parents[2] / "papers" / "everest" / "config.yaml", "smoke",
                      ["data.source=video", f"data.pretrain_list={tmp_path / 'list.txt'}", f"data.root={tmp_path}",
                       "data.frames=4", "data.stride=2", f"data.flip={str(flip).lower()}"])
    data = dataset(cfg, 0, "pretrain")
    left_brighter = []
    for epoch in range(12):
        data.set_epoch(epoch)
        clip, _ = data[0]
        left_brighter.append(bool(clip[..., 0].mean() > clip[..., -1].mean()))
    assert all(left_brighter) != flip
