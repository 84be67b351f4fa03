"""write_assets: the real-format stand-ins go through the full-profile code path (UCF101 split files,
seek decoding, the checkpoint key map via `model.init_checkpoint`)."""
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("av")

from papers.everest.experiments import dataset, initial_autoencoder, schedule  # noqa: E402
from papers.everest.official_checkpoint import (CheckpointMismatchError, load_official_checkpoint,  # noqa: E402
                                                official_key_map, read_official_state_dict)
from papers.everest.model import VideoClassifier  # noqa: E402
from papers.everest.rehearsal_assets import CLASSES, write_assets  # noqa: E402
from papers.everest.video import VideoReader, decode_video, read_list  # noqa: E402
from shared.config import load_config  # noqa: E402

CONFIG = Path(__file__).resolve().parents[2] / "papers" / "everest" / "config.yaml"
VIDEO = ["data.source=video", "data.channels=3", "data.size=32", "data.frames=8", "data.stride=2",
         "data.mean=[0.485,0.456,0.406]", "data.std=[0.229,0.224,0.225]", "data.test_segments=2"]


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rehearsal") / "assets"
    written = write_assets(folder, load_config(CONFIG, "smoke", VIDEO))
    return written, load_config(CONFIG, "smoke", [*VIDEO, *written.overrides()])


def test_layout_and_lists(assets):
    written, cfg = assets
    assert written.train_list.read_bytes().endswith(b"\r\n")
    first = written.train_list.read_text().splitlines()[0]
    assert first == "ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.mp4 1"
    assert written.test_list.read_text().splitlines()[0] == "ApplyEyeMakeup/v_ApplyEyeMakeup_g01_c01.mp4"
    train, test = dataset(cfg, 0, "finetune"), dataset(cfg, 0, "test")
    assert len(train) == 2 * len(CLASSES) and len(test) == len(CLASSES)
    assert all(p.is_file() for p, _ in train.items + test.items)
    assert [y for _, y in test.items] == list(range(len(CLASSES)))
    handstand = [(p.name, y) for p, y in train.items if "HandStand" in p.name]
    assert handstand == [("v_HandStandPushups_g08_c01.mp4", 2), ("v_HandStandPushups_g09_c01.mp4", 2)]
    video, labels = train.batch(torch.tensor([0, 5]))
    assert video.shape == (2, 3, 8, 32, 32) and labels.tolist() == [0, 2]
    views, label = test[1]
    assert views.shape == (2 * 3, 3, 8, 32, 32) and label == 1


def test_sampled_frames_are_decoded_by_seeking(assets):
    written, _ = assets
    path, _ = read_list(written.train_list, written.root, written.class_index)[3]
    full = decode_video(path)
    with VideoReader(path) as reader:
        frames = reader.frames([27, 29, 31, 33])
        assert reader.decoded < len(full) // 2
    np.testing.assert_array_equal(frames, full[[27, 29, 31, 33]])


def test_checkpoints_load_through_the_key_map(assets, tmp_path):
    written, cfg = assets
    ae = initial_autoencoder(cfg, seed=0)                     # model.init_checkpoint -> the written file
    state = read_official_state_dict(written.pretrain_checkpoint)
    names = official_key_map(ae)
    assert set(names.values()) == set(state)                  # every key matched, both ways
    assert all(torch.equal(ae.state_dict()[k], state[o]) for k, o in names.items())
    classifier = load_official_checkpoint(VideoClassifier(ae.encoder, len(CLASSES)), written.finetune_checkpoint)
    video, _ = dataset(cfg, 0, "test").batch(torch.tensor([0]))
    assert classifier(video[:, 0]).shape == (1, len(CLASSES))
    mutated = {k.replace("encoder_to_decoder", "encoder2decoder"): v for k, v in state.items()}
    torch.save({"model": mutated}, tmp_path / "mutated.pth")
    with pytest.raises(CheckpointMismatchError, match=r"missing 1 \[encoder_to_decoder.weight\]"):
        initial_autoencoder(load_config(CONFIG, "smoke", [*VIDEO, *written.overrides(),
                                                           f"model.init_checkpoint={tmp_path / 'mutated.pth'}"]), 0)


def test_the_schedule_is_stated_in_epochs_of_the_split_list(assets):
    """steps × batch clips over the videos that trainlist01.txt names: the paper's unit. The full
    profile's 100,000 × 24 over UCF101 split 1's 9,537 videos is 251.65 epochs, not the paper's 3200."""
    written, cfg = assets
    train = read_list(written.train_list, written.root, written.class_index)
    plan = schedule(cfg, "finetune", dataset(cfg, 0, "finetune"))
    assert plan["train_clips"] == len(train)
    assert plan["epochs"] == pytest.approx(cfg.finetune.steps * cfg.finetune.batch / len(train))
    full = load_config(CONFIG, "full")
    assert schedule(full, "pretrain", range(9537))["epochs"] == pytest.approx(251.65, abs=0.01)
