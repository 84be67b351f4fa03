"""FreeBind's metrics (against sklearn), the synthetic world, the config and the full-profile loaders."""
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.metrics import accuracy_score, top_k_accuracy_score

from papers.freebind import Projector
from papers.freebind.bonds import MOP_POOLS
from papers.freebind.evaluation import class_embeddings, evaluate, recall_at_k, zero_shot_accuracy
from papers.freebind.full import DIMS, evaluate_full, load_dataset, load_projector
from papers.freebind.world import MAX_TOKENS, N_CLASSES, SYNONYMS, World, WorldSpec
from shared.assets import MissingAssetError
from shared.config import load_config

CONFIG = Path(__file__).resolve().parents[2] / "papers" / "freebind" / "config.yaml"


def test_recall_and_zero_shot_match_sklearn():
    g = torch.Generator().manual_seed(0)
    q, gal = F.normalize(torch.randn(50, 6, generator=g), dim=-1), F.normalize(torch.randn(50, 6, generator=g), dim=-1)
    sims = (q @ gal.t()).numpy()
    r = recall_at_k(q, gal, ks=(1, 5))
    for k in (1, 5):
        assert r[k] == pytest.approx(100 * top_k_accuracy_score(np.arange(50), sims, k=k, labels=np.arange(50)))
    labels = np.random.default_rng(0).integers(0, 4, 50)
    prompts = F.normalize(torch.randn(8, 6, generator=g), dim=-1)
    cls = class_embeddings(prompts, 4)
    assert torch.allclose(cls[1], F.normalize(prompts[2:4].mean(0), dim=0))
    pred = (q @ cls.t()).argmax(1).numpy()
    assert zero_shot_accuracy(q, cls, labels) == pytest.approx(100 * accuracy_score(labels, pred))


def test_evaluate_reports_only_supported_columns():
    g = torch.Generator().manual_seed(1)
    emb = {"audio": F.normalize(torch.randn(30, 4, generator=g), dim=-1),
           "text": F.normalize(torch.randn(30 + 2 * N_CLASSES, 4, generator=g), dim=-1)}
    row = evaluate(emb, 30, np.arange(30) % N_CLASSES, N_CLASSES)
    assert row["at_r1"] is not None and row["audio_acc"] is not None
    assert row["vt_r1"] is None and row["image_acc"] is None and row["av_r1"] is None


def test_world_is_seeded_and_knob_ties_envelope_to_colour():
    w = World(WorldSpec(envelope_visibility=1.0))
    ev = w.sample_events(200, np.random.default_rng(0))
    assert (ev.envelope == ev.colour % 5).all()
    ev0 = World(WorldSpec(envelope_visibility=0.0)).sample_events(2000, np.random.default_rng(0))
    assert 0.1 < np.mean(ev0.envelope == ev0.colour) < 0.3
    a = w.render(ev, "audio", np.random.default_rng(1))
    b = w.render(ev, "audio", np.random.default_rng(1))
    assert torch.equal(a, b) and a.shape == (200, 384)
    assert w.render(ev, "image", np.random.default_rng(1)).shape == (200, 192)
    t = w.render(ev, "text", np.random.default_rng(1))
    assert t.shape == (200, MAX_TOKENS) and (t[:, 0] != 0).any()
    assert World.class_prompts().shape == (N_CLASSES * SYNONYMS, MAX_TOKENS)


def test_config_profiles_load():
    for profile in ("smoke", "tiny", "full"):
        cfg = load_config(CONFIG, profile)
        assert len(cfg.seeds) >= 1
    assert len(load_config(CONFIG, "tiny").seeds) >= 3


def _fixture(tmp_path: Path, d_small: int = 8):
    """Tiny stand-ins for the real arrays and released projectors, saved in the full-profile layout."""
    rng = np.random.default_rng(0)
    dims = {"imagebind": 12, "clap_g": 6, "clap_m": 6, "internvl": 10}
    emb_dir, proj_dir = tmp_path / "emb", tmp_path / "proj"
    mods = {"imagebind": ("audio", "image", "text"), "clap_g": ("audio", "text"), "clap_m": ("audio", "text"),
            "internvl": ("image", "text")}
    specs = {"esc50": ("audio",), "audioset": ("audio",), "imagenet": ("image",), "audiocaps": ("text", "audio"),
             "clotho": ("text", "audio"), "vggss": ("audio", "image"), "flickrnet": ("audio", "image"),
             "coco": ("text", "image"), "flickr30k": ("text", "image")}
    for ds, dmods in specs.items():
        base = emb_dir / ds
        base.mkdir(parents=True)
        for space, d in dims.items():
            for m in dmods:
                if m in mods[space]:
                    np.save(base / f"{space}_{m}.npy", rng.standard_normal((20, d)).astype(np.float32))
            if ds in ("esc50", "audioset", "imagenet") and "text" in mods[space]:
                np.save(base / f"{space}_prompts.npy", rng.standard_normal((4 * 2, d)).astype(np.float32))
        if ds == "audioset":
            np.save(base / "labels.npy", (rng.random((20, 4)) < 0.4).astype(np.int64))
        elif ds in ("esc50", "imagenet"):
            np.save(base / "labels.npy", rng.integers(0, 4, 20))
    for folder, (a, b) in {"IB_PP_G_Proj": ("clap_g", "imagebind"), "IB_PP_M_Proj": ("clap_m", "imagebind"),
                           "InternVL_IB_Proj": ("imagebind", "internvl"),
                           "InternVL_IB_PP_G_Proj": ("clap_g", "internvl"), "InternVL_IB_PP_M_Proj": ("clap_m", "internvl")}.items():
        for member in MOP_POOLS:
            (proj_dir / folder / member).mkdir(parents=True)
            p = Projector(dims[a], dims[b], hidden=d_small)
            state = p.state_dict()
            if folder == "IB_PP_M_Proj":  # another key layout: matched by order and shape
                state = {f"layer{i}": v for i, v in enumerate(state.values())}
            torch.save(state, proj_dir / folder / member / "best.pt")
    return emb_dir, proj_dir


def test_full_loaders_and_harness_on_fixture_arrays(tmp_path):
    emb_dir, proj_dir = _fixture(tmp_path)
    data = load_dataset(emb_dir, "audiocaps")
    assert set(data) == {"imagebind", "clap_g", "clap_m", "internvl"}
    assert torch.allclose(data["clap_g"]["audio"].norm(dim=-1), torch.ones(20), atol=1e-5)
    p = load_projector(proj_dir / "IB_PP_M_Proj" / "mix" / "best.pt", 6, 12, hidden=8)
    ref = Projector(6, 12, hidden=8)
    assert p(torch.randn(3, 6)).shape == (3, 12) and set(p.state_dict()) == set(ref.state_dict())
    cfg = load_config(CONFIG, "full", [f"full.embeddings_dir={emb_dir}", f"full.projectors_dir={proj_dir}",
                                       "full.proj_hidden=8",
                                       "full.dims={imagebind: 12, clap_g: 6, clap_m: 6, internvl: 10}"])
    out = evaluate_full(cfg)
    rows = out["rows"]
    assert rows["U"]["esc50_acc"] is not None and rows["U"]["coco_r1"] is not None
    assert 0 <= rows["U"]["audioset_map"] <= 100
    assert "esc50_acc" in rows["E1"] and "coco_r1" not in rows["E1"] and "imagenet_acc" in rows["VT"]
    for row in ("parallel_ATE", "parallel_versatile", "d_VT_dense", "sequential_ATE"):
        assert {"audiocaps_r1", "vggss_r1", "coco_r1", "esc50_acc", "imagenet_acc"} <= set(rows[row]), row
    assert rows["parallel_ATE"]["at_r1"] == rows["parallel_ATE"]["audiocaps_r1"]  # aliases for the tables
    assert len(out["lam_t_curve"]) == len(cfg.sweep.lam_t) and "coco_r1" in out["lam_t_curve"][0]
    # the released-layout check: a state dict that cannot be mapped is refused
    torch.save({"w": torch.zeros(3)}, tmp_path / "bad.pt")
    with pytest.raises(ValueError):
        load_projector(tmp_path / "bad.pt", 6, 12, hidden=8)


def test_full_profile_missing_path_is_one_message(tmp_path):
    with pytest.raises(MissingAssetError, match="full.embeddings_dir"):
        load_dataset(tmp_path / "nope", "esc50")
    with pytest.raises(MissingAssetError, match="Viglong/FreeBind"):
        from papers.freebind.full import load_mop

        load_mop(None, "IB_PP_G_Proj", 512, 1024)
    assert DIMS["imagebind"] == 1024
