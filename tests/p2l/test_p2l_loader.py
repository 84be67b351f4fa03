"""The full profile's loader on a tiny pipeline saved with save_pretrained; the data."""
import pytest
import torch

from papers.p2l import load_stable_diffusion, save_pipeline
from papers.p2l.data import make_split
from shared.assets import MissingAssetError, require_path

from test_p2l_solver import tiny_ldm


def test_full_profile_loader_on_saved_tiny_pipeline(tmp_path):
    ldm = tiny_ldm(seed=1)
    save_pipeline(ldm, tmp_path / "sd")
    path = require_path(tmp_path / "sd", what="SD", fetch="x", config_key="full.sd_path")
    loaded = load_stable_diffusion(path)
    assert loaded.scale == pytest.approx(0.7)
    z = torch.randn(1, 4, 4, 4)
    C = loaded.embed(["red circle dark"])
    assert torch.allclose(C, ldm.embed(["red circle dark"]))
    assert torch.equal(loaded.null_prompt(1), ldm.null_prompt(1))
    with torch.no_grad():
        assert torch.allclose(loaded.eps(z, 10, C), ldm.eps(z, 10, C), atol=1e-6)
        assert torch.allclose(loaded.decode(z), ldm.decode(z), atol=1e-6)
    assert all(not p.requires_grad for p in loaded.unet.parameters())


def test_missing_sd_path_stops_with_one_message(tmp_path):
    with pytest.raises(MissingAssetError, match="full.sd_path"):
        require_path(tmp_path / "nope", what="Stable Diffusion v1.5 weights", fetch="sd-1.5", config_key="full.sd_path")


def test_null_caption_is_all_empty_tokens():
    ldm = tiny_ldm()
    ids = ldm.tokenize(["", "red circle dark"])
    assert ids[0].tolist() == [0, 0, 0] and 0 not in ids[1].tolist()


def test_data_is_seeded_and_in_range():
    a, b = make_split(0, "test", 4), make_split(0, "test", 4)
    assert torch.equal(a["images"], b["images"]) and a["captions"] == b["captions"]
    assert a["images"].min() >= -1 and a["images"].max() <= 1
    assert not torch.equal(a["images"], make_split(0, "val", 4)["images"])

