"""VideoReader (seek to the keyframe before the wanted frames, decode forward to the last one) against
full decoding, the dataset built on it, and the split lists (path-label lists, UCF101's official files)."""
import numpy as np
import pytest
import torch

pytest.importorskip("av")

from papers.everest.video import (ListFormatError, VideoListDataset, VideoReader, _to_tensor, decode_video,  # noqa: E402
                                  pretrain_indices, random_resized_crop, read_class_index, read_list, resize_short,
                                  three_crops, train_indices, write_test_video)
from papers.everest.video import test_indices as segment_indices  # noqa: E402  (not a test)

GOP = 8


def coherent_frames(n: int = 60, height: int = 32, width: int = 48) -> np.ndarray:
    """A still noise background, a moving square and a band whose brightness is the frame index: every
    frame differs, yet no frame looks like a scene cut, so the encoder keeps its GOP."""
    rng = np.random.default_rng(0)
    frames = np.repeat(rng.integers(0, 160, size=(1, height, width, 3), dtype=np.uint8), n, axis=0)
    for f in range(n):
        frames[f, 8:16, f % (width - 8):f % (width - 8) + 8] = 240
        frames[f, :4] = 3 * f
    return frames


@pytest.fixture(scope="module", params=[(".mp4", 0), (".mp4", 2), (".avi", 0), (".avi", 2)],
                ids=["mp4", "mp4-bframes", "avi", "avi-bframes"])
def video(request, tmp_path_factory):
    suffix, b_frames = request.param
    path = write_test_video(tmp_path_factory.mktemp("video") / f"clip{suffix}", coherent_frames(), gop_size=GOP,
                            b_frames=b_frames)
    return path, decode_video(path), b_frames


def test_reader_frames_equal_full_decoding(video):
    path, full, b_frames = video
    n = len(full)
    with VideoReader(path) as reader:
        assert len(reader) == n
        assert len(reader.keyframes) > 1 and np.all(np.diff(reader.keyframes) > 1)   # GOP > 1: seeking matters
    rng = np.random.default_rng(0)
    index_sets = [[37, 41, 45], [45, 37, 37, 41], [0], [n - 1], [GOP - 1], [GOP], [GOP + 1, GOP + 2],
                  [3, 50], np.concatenate(segment_indices(n, 8, 2, 3)), pretrain_indices(n, 8, 4, rng),
                  train_indices(n, 8, 4, rng)]
    for indices in index_sets:
        with VideoReader(path) as reader:
            np.testing.assert_array_equal(reader.frames(indices), full[np.asarray(indices)], err_msg=str(indices))
    with VideoReader(path) as reader:                 # from mid-video: only the GOP of frame 37 on is decoded
        reader.frames([37, 41, 45])
        first_key = 37 // GOP * GOP
        assert reader.decoded <= 45 - first_key + 1 + b_frames < n
    with VideoReader(path) as reader:                 # two far-apart frames: a second seek, not a decode between
        reader.frames([3, 50])
        assert reader.decoded <= (3 + 1) + (50 - 50 // GOP * GOP + 1) + 2 * b_frames
    with VideoReader(path) as reader, pytest.raises(IndexError):
        reader.frames([n])


def test_reader_decodes_everything_when_timestamps_disagree(video):
    """Frames the index cannot place (here: an index of timestamps the decoder never reports) make the
    reader fall back to a full decode, which still returns the right frames."""
    path, full, _ = video
    with VideoReader(path) as reader:
        reader.index_of = {t + 10 ** 9: i for t, i in reader.index_of.items()}
        np.testing.assert_array_equal(reader.frames([37, 41]), full[[37, 41]])
        assert reader.decoded > len(full)


def test_dataset_items_equal_those_of_full_decoding(video, tmp_path):
    """The items are what the loader built from a full decode (same indices, same crops)."""
    path, full, _ = video
    (tmp_path / "list.txt").write_text(f"{path} 2\n")
    for mode in ("pretrain", "train", "test"):
        data = VideoListDataset(tmp_path / "list.txt", mode=mode, clip_len=8, stride=4, size=24, segments=2, seed=3)
        data.set_epoch(1)
        clip, label = data[0]
        rng = np.random.default_rng([3, 1, 0])
        if mode == "test":
            expected = torch.stack([v for idx in segment_indices(len(full), 8, 4, 2)
                                    for v in three_crops(resize_short(_to_tensor(full[idx]), 24), 24)])
        elif mode == "pretrain":
            expected = random_resized_crop(_to_tensor(full[pretrain_indices(len(full), 8, 4, rng)]), 24, rng,
                                           scale=(0.66, 1.0), ratio=(1.0, 1.0))
        else:
            expected = random_resized_crop(_to_tensor(full[train_indices(len(full), 8, 4, rng)]), 24, rng)
        assert label == 2 and torch.equal(clip, expected), mode


def write_ucf101_lists(folder):
    (folder / "classInd.txt").write_bytes(b"1 ApplyEyeMakeup\r\n2 Archery\r\n3 HandstandPushups\r\n")
    (folder / "trainlist01.txt").write_bytes(b"ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi 1\r\n"
                                             b"HandstandPushups/v_HandStandPushups_g08_c01.avi 3\r\n\r\n")
    (folder / "testlist01.txt").write_bytes(b"Archery/v_Archery_g01_c01.avi\r\n"
                                            b"HandstandPushups/v_HandStandPushups_g01_c01.avi\r\n")


def test_ucf101_split_files(tmp_path):
    write_ucf101_lists(tmp_path)
    index = tmp_path / "classInd.txt"
    assert read_class_index(index) == {"ApplyEyeMakeup": 0, "Archery": 1, "HandstandPushups": 2}
    train = read_list(tmp_path / "trainlist01.txt", "/data/UCF-101", index)
    assert [(str(p), y) for p, y in train] == [
        ("/data/UCF-101/ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi", 0),
        ("/data/UCF-101/HandstandPushups/v_HandStandPushups_g08_c01.avi", 2)]
    test = read_list(tmp_path / "testlist01.txt", "/data/UCF-101", index)
    assert [y for _, y in test] == [1, 2]                       # from the folder, not the file name
    (tmp_path / "bad.txt").write_text("Archery/v_Archery_g08_c01.avi 1\n")
    with pytest.raises(ListFormatError, match="disagrees"):
        read_list(tmp_path / "bad.txt", None, index)
    (tmp_path / "unknown.txt").write_text("Bowling/v_Bowling_g01_c01.avi\n")
    with pytest.raises(ListFormatError, match="'Bowling'"):
        read_list(tmp_path / "unknown.txt", None, index)
    with pytest.raises(ListFormatError, match="class_index"):   # a testlist read as "path label" lines
        read_list(tmp_path / "testlist01.txt")


def test_path_label_lists_keep_their_labels(tmp_path):
    (tmp_path / "train.csv").write_text("a/x.mp4 0\r\n/abs/y.mp4 7\n")
    assert [(str(p), y) for p, y in read_list(tmp_path / "train.csv", "/root")] == [("/root/a/x.mp4", 0),
                                                                                    ("/abs/y.mp4", 7)]
