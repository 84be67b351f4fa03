"""official_checkpoint: the key map against the official layouts (as rehearsal_assets spells them), strict
loading, one-line errors for a wrong file, and `model.init_checkpoint` in the experiments."""
import argparse
import pathlib
from pathlib import Path

import pytest
import torch

from papers.everest.experiments import EXPERIMENTS, initial_autoencoder
from papers.everest.model import VideoClassifier, build_autoencoder
from papers.everest.official_checkpoint import (CheckpointMismatchError, load_official_checkpoint, official_key_map,
                                                read_official_state_dict)
from papers.everest.rehearsal_assets import finetune_checkpoint_shapes, pretrain_checkpoint_shapes, random_state
from shared.config import load_config
from shared.experiment import cli
from shared.seeding import derive_seed

CONFIG = Path(__file__).resolve().parents[2] / "papers" / "everest" / "config.yaml"
VIDEO = ["data.source=video", "data.channels=3", "data.size=32", "data.frames=8", "data.stride=2",
         "data.mean=[0.485,0.456,0.406]", "data.std=[0.229,0.224,0.225]", "data.num_classes=3"]


def video_config(*overrides):
    return load_config(CONFIG, "smoke", [*VIDEO, *overrides])


def official_shapes(cfg, layout):
    m, c = cfg.model, cfg.data.channels
    if layout == "pretrain":
        return pretrain_checkpoint_shapes(c, m.patch, m.tubelet, m.dim, m.depth, m.decoder_dim, m.decoder_depth)
    return finetune_checkpoint_shapes(c, m.patch, m.tubelet, m.dim, m.depth, cfg.data.num_classes)


@pytest.mark.parametrize("depths", [(1, 1), (3, 2)])
def test_key_map_covers_the_official_layouts(depths):
    cfg = video_config(f"model.depth={depths[0]}", f"model.decoder_depth={depths[1]}")
    ae = build_autoencoder(cfg)
    for model, layout in [(ae, "pretrain"), (VideoClassifier(ae.encoder, 3), "finetune")]:
        names, ours, official = official_key_map(model), model.state_dict(), official_shapes(cfg, layout)
        assert sorted(names.values()) == sorted(official)                  # a bijection onto the official keys
        assert all(tuple(ours[k].shape) == official[o] for k, o in names.items())


def save(path, state, wrap="model", **extra):
    torch.save({wrap: state, **extra} if wrap else state, path)
    return path


def test_official_files_load_strictly(tmp_path):
    cfg = video_config()
    state = random_state(official_shapes(cfg, "pretrain"), seed=0)
    args = argparse.Namespace(model="pretrain_videomae_base_patch16_224", mask_ratio=0.9)
    ae = load_official_checkpoint(build_autoencoder(cfg), save(tmp_path / "pre.pth", state, epoch=799, args=args))
    ours = ae.state_dict()
    assert all(torch.equal(ours[k], state[o]) for k, o in official_key_map(ae).items())
    loss = ae(torch.rand(2, 3, 8, 32, 32), *masks(ae))
    assert torch.isfinite(loss)
    tuned = random_state(official_shapes(cfg, "finetune"), seed=1)
    classifier = VideoClassifier(build_autoencoder(cfg).encoder, 3)
    load_official_checkpoint(classifier, save(tmp_path / "ft.pth", tuned, wrap="module"))
    assert torch.equal(classifier.head.weight, tuned["head.weight"])
    assert torch.equal(classifier.encoder.blocks[0].attn.q_bias, tuned["blocks.0.attn.q_bias"])
    assert torch.equal(classifier.encoder.blocks[0].mlp[2].weight, tuned["blocks.0.mlp.fc2.weight"])
    assert read_official_state_dict(save(tmp_path / "bare.pth", tuned, wrap=None)).keys() == tuned.keys()


def masks(ae):
    n = ae.encoder.num_tokens
    visible = torch.zeros(2, n, dtype=torch.bool)
    visible[:, :2] = True
    return visible, ~visible


def one_line_error(model, path) -> str:
    with pytest.raises(CheckpointMismatchError) as err:
        load_official_checkpoint(model, path)
    assert "\n" not in str(err.value)
    return str(err.value)


def test_a_wrong_file_stops_in_one_line(tmp_path):
    cfg = video_config()
    state = random_state(official_shapes(cfg, "pretrain"), seed=0)
    renamed = dict(state)
    renamed["encoder.blocks.0.mlp.fc_1.weight"] = renamed.pop("encoder.blocks.0.mlp.fc1.weight")
    message = one_line_error(build_autoencoder(cfg), save(tmp_path / "renamed.pth", renamed))
    assert "missing 1 [encoder.blocks.0.mlp.fc1.weight]" in message and "unexpected 1 [encoder.blocks.0.mlp.fc_1.weight]" in message
    message = one_line_error(build_autoencoder(video_config("model.dim=48")), save(tmp_path / "pre.pth", state))
    assert "missing" not in message and "wrong shape" in message
    assert "encoder.blocks.0.attn.proj.bias (32,) vs (48,)" in message
    tuned = random_state(official_shapes(cfg, "finetune"), seed=1)
    message = one_line_error(build_autoencoder(cfg), save(tmp_path / "ft.pth", tuned, wrap="module"))
    assert "looks like a fine-tuning checkpoint" in message
    message = one_line_error(build_autoencoder(cfg), save(tmp_path / "pickled.pth", state, video_root=pathlib.PurePosixPath("x")))
    assert "weights-only" in message
    (tmp_path / "text.pth").write_text("not a checkpoint")
    one_line_error(build_autoencoder(cfg), tmp_path / "text.pth")


def test_init_checkpoint_starts_every_arm(tmp_path):
    cfg = video_config()
    state = random_state(official_shapes(cfg, "pretrain"), seed=0)
    path = save(tmp_path / "pre.pth", state)
    ae = initial_autoencoder(video_config(f"model.init_checkpoint={path}"), seed=0)
    assert torch.equal(ae.encoder.embed.proj.weight, state["encoder.patch_embed.proj.weight"])
    torch.manual_seed(derive_seed(0, "init"))                           # null: the seeded random init, as before
    before = build_autoencoder(cfg).state_dict()
    assert all(torch.equal(v, before[k]) for k, v in initial_autoencoder(cfg, seed=0).state_dict().items())


@pytest.mark.parametrize("checkpoint", ["missing", "fine-tuning"])
def test_cli_stops_with_one_line_and_exit_2(tmp_path, capsys, checkpoint):
    cfg = video_config()
    path = tmp_path / "absent.pth"
    if checkpoint == "fine-tuning":
        path = save(tmp_path / "ft.pth", random_state(official_shapes(cfg, "finetune"), seed=1), wrap="module")
    with pytest.raises(SystemExit) as exit_:
        cli("everest", EXPERIMENTS, CONFIG, ["pretrain_everest", "--profile", "smoke", "--out", str(tmp_path / "out"),
                                             "--set", f"model.init_checkpoint={path}"])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and "\n" not in err and str(path) in err
    assert ("model.init_checkpoint" in err) if checkpoint == "missing" else ("CheckpointMismatchError" in err)
