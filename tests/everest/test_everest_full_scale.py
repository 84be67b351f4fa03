"""What a GPU cluster would meet at full scale, checked on CPU: every draw of a video gets its own
augmentation, loader workers do not change the batches, each DDP rank draws its own masks, and a
training never deletes a checkpoint (so no rank reads one that another deletes)."""
from pathlib import Path

import numpy as np
import pytest
import torch

from papers.everest import modules
from papers.everest.model import build_autoencoder
from papers.everest.modules import PretrainModule, batches, loader_workers, run_root
from papers.everest.recipe import make_masks
from papers.everest.train import pretrain
from papers.everest.video import VideoListDataset, write_test_video
from shared.config import load_config
from shared.seeding import derive_seed

CONFIG = Path(__file__).resolve().parents[2] / "papers" / "everest" / "config.yaml"


@pytest.fixture(scope="module")
def one_video_list(tmp_path_factory):
    """A list of one short video with a still noise background and a moving square."""
    folder = tmp_path_factory.mktemp("videos")
    rng = np.random.default_rng(0)
    frames = np.repeat(rng.integers(0, 160, size=(1, 32, 48, 3), dtype=np.uint8), 40, axis=0)
    for f in range(40):
        frames[f, 8:16, f:f + 8] = 240
        frames[f, :4] = 5 * f
    path = write_test_video(folder / "clip.mp4", frames)
    (folder / "list.txt").write_text(f"{path} 0\n")
    return folder / "list.txt"


def loaded(data, workers: int = 0, steps: int = 2, batch: int = 4) -> list[torch.Tensor]:
    return [video for video, _ in batches(data, batch, steps, seed=7, workers=workers)]


def test_two_draws_of_one_video_differ(one_video_list):
    """With one video every index drawn is 0: each draw must still get its own window, crop and flip
    (they were keyed by (seed, epoch, index) only, so every draw of a video was the same clip)."""
    data = VideoListDataset(one_video_list, mode="pretrain", clip_len=8, stride=2, size=24, seed=3)
    clips = torch.cat(loaded(data))
    assert len(clips) == 8
    assert len({c.numpy().tobytes() for c in clips}) == 8
    assert all(torch.equal(a, b) for a, b in zip(clips, torch.cat(loaded(data))))   # and the same in every run
    assert torch.equal(data[0][0], data[0][0])   # plain indexing (tests, views) keeps its fixed key


def test_loader_workers_follow_the_cpus_without_changing_the_batches(one_video_list, monkeypatch):
    data = VideoListDataset(one_video_list, mode="train", clip_len=8, stride=2, size=24, seed=3)
    one = loaded(data, workers=0)
    two = loaded(data, workers=2)
    assert all(torch.equal(a, b) for a, b in zip(one, two))
    monkeypatch.setattr(modules.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    assert loader_workers(-1) == 15 and loader_workers(0) == 0 and loader_workers(3) == 3
    cfg = load_config(CONFIG, "full")
    assert cfg.data.workers == -1 and "workers" not in modules.cache_config(cfg)["data"]


def test_each_rank_draws_its_own_masks(monkeypatch):
    """Rank 0 keeps the one-process stream; rank 1 draws other masks, the same again at the same step
    (so a resumed run reproduces them)."""
    cfg = load_config(CONFIG, "smoke")
    torch.manual_seed(0)
    model = build_autoencoder(cfg)
    clip = torch.rand(2, 1, cfg.data.frames, cfg.data.size, cfg.data.size)

    def masks(rank: int, step: int):
        monkeypatch.setattr(PretrainModule, "global_rank", property(lambda self: rank))
        monkeypatch.setattr(PretrainModule, "global_step", property(lambda self: step))
        module = PretrainModule(model, "everest", cfg, seed=5)
        module._rank_generators()
        return make_masks(model, clip, "everest", cfg.selection, module.gens["masks"])[1]

    reference = make_masks(model, clip, "everest", cfg.selection,
                           torch.Generator().manual_seed(derive_seed(5, "masks")))[1]
    assert torch.equal(masks(0, 3), reference)
    assert not torch.equal(masks(1, 3), reference)
    assert torch.equal(masks(1, 3), masks(1, 3)) and not torch.equal(masks(1, 3), masks(1, 4))
    assert not torch.equal(masks(1, 3), masks(2, 3))


def test_a_changed_config_deletes_no_checkpoint(tmp_path):
    """A training keeps its step checkpoint under run-<config hash>: one of another config is never in
    its way, so no process deletes a checkpoint (under DDP another rank may be reading it)."""
    ckpt_dir = tmp_path / "pretrain_everest" / "seed0"
    runs = []
    for lr in ("1.0e-3", "2.0e-3"):
        cfg = load_config(CONFIG, "smoke", ["pretrain.steps=2", f"pretrain.lr={lr}"])
        torch.manual_seed(0)
        pretrain(build_autoencoder(cfg), _clips(cfg), "everest", cfg, 0, ckpt_dir, {2: "b100"})
        runs.append(run_root(ckpt_dir, cfg))
    assert runs[0] != runs[1]
    for root in runs:
        assert (root / "checkpoints" / "last.ckpt").is_file()
    assert (ckpt_dir / "b100.pt").is_file()


def _clips(cfg):
    from papers.everest.data import make_clips

    return make_clips(8, 0, **{**cfg.data.to_dict(), "frames": cfg.data.frames})
