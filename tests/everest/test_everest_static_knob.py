"""The static-context knob of the procedural world (`data.static_share`) and the two readers."""
import numpy as np
import pytest
import torch

from papers.everest.data import INTENSITY_LEVELS, class_split, make_clips
from papers.everest.readers import read_class, reader_accuracy, scene_index


def moving_levels(clips) -> torch.Tensor:
    """The moving digit's intensity level from the ground-truth mask (noise-free clips): its brightest
    pixel per frame, the median over frames (a frame where it crosses the distractor shows the brighter)."""
    peak = (clips.video[:, 0] * clips.moving).flatten(2).max(2).values.median(1).values
    return (peak.unsqueeze(-1) - torch.tensor(INTENSITY_LEVELS)).abs().argmin(-1)


def test_class_split_shares_the_bits():
    assert [class_split(4, s) for s in (0.0, 0.5, 1.0)] == [(1, 4), (2, 2), (4, 1)]
    with pytest.raises(ValueError, match="whole divisor"):
        class_split(4, 0.25)


@pytest.mark.parametrize("share", [0.0, 0.5, 1.0])
def test_the_moving_digit_carries_only_its_share_of_the_class(share):
    """At share s the digit's level tells the class's motion part and nothing more: at s = 1 every
    class shows every level, at s = 0.5 the level's half is the class's parity, at s = 0 level = class."""
    clips = make_clips(400, 2, noise=0.0, static_share=share)
    scenes, values = class_split(4, share)
    level, labels = moving_levels(clips), clips.labels
    allowed = level // (4 // values) == labels % values     # a few clips: the digit sits on the distractor
    assert allowed.float().mean() >= 0.97
    table = np.zeros((4, 4), int)
    np.add.at(table, (labels[allowed].numpy(), level[allowed].numpy()), 1)
    share_of_class = table / table.sum(1, keepdims=True)
    assert int((share_of_class > 0.1).sum()) == 4 * (4 // values)   # each class shows its 4/D levels alike


@pytest.mark.parametrize("share", [0.5, 1.0])
def test_the_background_carries_the_scene_part(share):
    clips = make_clips(300, 5, static_share=share)
    scenes, values = class_split(4, share)
    agree = (scene_index(clips.video, scenes) == clips.labels // values).float().mean()
    assert agree >= 0.85


def test_readers_bracket_the_world():
    """The motion-gated reader reads every bit at each point; the motion-blind one reads the static
    part but confuses the moving digit with the static distractor, so it gains as the share grows."""
    blind = []
    for share in (0.0, 0.5, 1.0):
        clips = make_clips(300, 9, static_share=share)
        assert reader_accuracy(clips, share, motion_gated=True) >= 85.0
        blind.append(reader_accuracy(clips, share, motion_gated=False))
    assert blind[0] <= 70.0 and blind[0] < blind[1] < blind[2]
    clips = make_clips(50, 9, static_share=1.0)               # no motion part: both readers agree
    assert torch.equal(read_class(clips.video, 1.0, True), read_class(clips.video, 1.0, False))
