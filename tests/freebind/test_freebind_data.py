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


def brute_force_recall(sims: np.ndarray, query_item, gallery_item, k: int) -> float:
    """Count hits one query at a time: sort the gallery by score, wrong rows first among equals
    (ties count against the query), and look for a row of the query's item in the first k."""
    hits = 0
    for i, row in enumerate(sims):
        correct = [gallery_item[j] == query_item[i] for j in range(len(row))]
        order = sorted(range(len(row)), key=lambda j: (-row[j], correct[j]))
        hits += any(correct[j] for j in order[:k])
    return 100.0 * hits / len(sims)


def test_recall_with_several_captions_matches_brute_force():
    # 4 items with 5 captions each; the captions of item i sit near item i's embedding, some far off
    rng = np.random.default_rng(3)
    items = F.normalize(torch.tensor(rng.standard_normal((4, 3)), dtype=torch.float32), dim=-1)
    caption_item = np.repeat(np.arange(4), 5)
    noise = torch.tensor(rng.standard_normal((20, 3)) * np.where(np.arange(20) % 5 < 2, 2.0, 0.3)[:, None],
                         dtype=torch.float32)
    captions = F.normalize(items[caption_item] + noise, dim=-1)
    # text→X: each caption is a query, a hit when its item ranks in the top k
    r = recall_at_k(captions, items, ks=(1, 2, 3), query_item=caption_item)
    sims = (captions @ items.t()).numpy()
    for k in (1, 2, 3):
        assert r[k] == pytest.approx(brute_force_recall(sims, caption_item, np.arange(4), k))
    assert r[1] < r[3]  # the crafted case separates the ks
    # X→text: an item is a hit when any of its 5 captions ranks in the top k (20 captions in the gallery)
    r = recall_at_k(items, captions, ks=(1, 5), gallery_item=caption_item)
    sims = (items @ captions.t()).numpy()
    for k in (1, 5):
        assert r[k] == pytest.approx(brute_force_recall(sims, np.arange(4), caption_item, k))
    # a hand-made X→text case: item 0's best caption is beaten by 3 wrong captions, item 1's by none
    sims = torch.tensor([[0.5, 0.1, 0.9, 0.8, 0.7], [0.2, 0.1, 0.9, 0.3, 0.0]])
    gallery_item = np.array([0, 0, 1, 1, 1])
    eye = torch.eye(2)
    hand = recall_at_k(eye, sims.t().contiguous(), ks=(1, 3, 4), gallery_item=gallery_item)
    assert hand == {1: 50.0, 3: 50.0, 4: 100.0}


def test_recall_ties_count_against_the_query():
    q = torch.tensor([[1.0, 0.0]])
    gallery = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])  # the match ties with a wrong row
    assert recall_at_k(q, gallery, ks=(1, 2)) == {1: 0.0, 2: 100.0}
    with pytest.raises(ValueError, match="at least one gallery row"):
        recall_at_k(q, gallery, query_item=[7])


def test_evaluate_uses_every_caption_and_reports_only_supported_columns():
    g = torch.Generator().manual_seed(1)
    caption_item = np.repeat(np.arange(30), 2)
    emb = {"audio": F.normalize(torch.randn(30, 4, generator=g), dim=-1),
           "text": F.normalize(torch.randn(60 + 2 * N_CLASSES, 4, generator=g), dim=-1)}
    row = evaluate(emb, caption_item, np.arange(30) % N_CLASSES, N_CLASSES)
    assert row["at_r1"] is not None and row["audio_acc"] is not None
    assert row["vt_r1"] is None and row["image_acc"] is None and row["av_r1"] is None
    assert row["at_r5"] == recall_at_k(emb["text"][:60], emb["audio"], query_item=caption_item)[5]
    cls = class_embeddings(emb["text"][60:], N_CLASSES)
    assert row["audio_acc"] == zero_shot_accuracy(emb["audio"], cls, np.arange(30) % N_CLASSES)


def test_world_is_seeded_and_knob_ties_envelope_to_colour():
    w = World(WorldSpec(envelope_visibility=1.0))
    ev = w.sample_events(200, np.random.default_rng(0))
    assert (ev.envelope == ev.colour % 5).all()
    ev0 = World(WorldSpec(envelope_visibility=0.0)).sample_events(2000, np.random.default_rng(0))
    assert 0.1 < np.mean(ev0.envelope == ev0.colour) < 0.3
    rep = ev.repeat(3)
    assert len(rep) == 600 and (rep.cls[:3] == ev.cls[0]).all() and (rep.envelope[3:6] == ev.envelope[1]).all()
    a = w.render(ev, "audio", np.random.default_rng(1))
    b = w.render(ev, "audio", np.random.default_rng(1))
    assert torch.equal(a, b) and a.shape == (200, 384)
    assert w.render(ev, "image", np.random.default_rng(1)).shape == (200, 192)
    t = w.render(ev, "text", np.random.default_rng(1))
    assert t.shape == (200, MAX_TOKENS) and (t[:, 0] != 0).any()
    assert World.class_prompts().shape == (N_CLASSES * SYNONYMS, MAX_TOKENS)


def test_expert_captions_name_intensity_only_as_reliably_as_asked():
    from papers.freebind.world import INT0, N_INTENSITY

    w = World(WorldSpec(p_intensity=1.0))
    ev = w.sample_events(3000, np.random.default_rng(0))
    true = np.minimum(((ev.intensity - 0.3) / 0.7 * N_INTENSITY).astype(int), N_INTENSITY - 1)

    def agreement(reliability):
        t = w.texts(ev, np.random.default_rng(1), intensity_reliability=reliability).numpy()
        said = np.array([[x - INT0 for x in row if INT0 <= x < INT0 + N_INTENSITY][0] for row in t])
        return np.mean(said == true)

    assert agreement(1.0) == 1.0
    assert abs(agreement(0.0) - 1 / N_INTENSITY) < 0.04  # a random word: chance agreement


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
                    n = 40 if (ds == "coco" and m == "text") else 20  # coco: 2 captions per image
                    np.save(base / f"{space}_{m}.npy", rng.standard_normal((n, d)).astype(np.float32))
            if ds in ("esc50", "audioset", "imagenet") and "text" in mods[space]:
                np.save(base / f"{space}_prompts.npy", rng.standard_normal((4 * 2, d)).astype(np.float32))
        if ds == "audioset":
            np.save(base / "labels.npy", (rng.random((20, 4)) < 0.4).astype(np.int64))
        elif ds in ("esc50", "imagenet"):
            np.save(base / "labels.npy", np.full(20, 1))  # one class seen: the count must come from classes.txt
        if ds in ("esc50", "audioset", "imagenet"):
            (base / "classes.txt").write_text("dog\ncat\nrain\nbell\n")
        if ds == "coco":
            np.save(base / "caption_item.npy", np.repeat(np.arange(20), 2))
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


def test_full_scoring_takes_class_count_from_metadata_and_every_caption(tmp_path):
    from papers.freebind.full import score_dataset

    emb_dir, _ = _fixture(tmp_path)
    esc = load_dataset(emb_dir, "esc50")
    assert esc["n_classes"] == 4 and set(esc["labels"].tolist()) == {1}
    audio, prompts = esc["clap_g"]["audio"], esc["clap_g"]["prompts"]
    got = score_dataset("esc50", {"audio": audio}, prompts, esc["labels"], esc["n_classes"])
    assert got["esc50_acc"] == zero_shot_accuracy(audio, class_embeddings(prompts, 4), esc["labels"])
    with pytest.raises(ValueError, match="classes.txt"):
        score_dataset("esc50", {"audio": audio}, prompts, esc["labels"], None)
    coco = load_dataset(emb_dir, "coco")
    text, image = coco["internvl"]["text"], coco["internvl"]["image"]
    got = score_dataset("coco", {"text": text, "image": image}, None, None, None, coco["caption_item"])
    assert got["coco_r5"] == recall_at_k(text, image, query_item=np.repeat(np.arange(20), 2))[5]
    (emb_dir / "esc50" / "classes.txt").unlink()
    with pytest.raises(MissingAssetError, match="class names of esc50"):
        load_dataset(emb_dir, "esc50")


def test_make_arrays_prompts_per_modality_and_caption_columns():
    from papers.freebind.make_arrays import caption_columns, class_prompts

    audio = class_prompts(["dog", "rain"], "audio")
    assert audio[0] == "a sound of dog." and all("photo" not in p for p in audio) and len(audio) % 2 == 0
    assert all("sound" not in p for p in class_prompts(["dog"], "image"))
    assert caption_columns(["audio", "text_10", "text", "text_2", "label"]) == ["text", "text_2", "text_10"]


def test_full_profile_missing_path_is_one_message(tmp_path):
    with pytest.raises(MissingAssetError, match="full.embeddings_dir"):
        load_dataset(tmp_path / "nope", "esc50")
    with pytest.raises(MissingAssetError, match="Viglong/FreeBind"):
        from papers.freebind.full import load_mop

        load_mop(None, "IB_PP_G_Proj", 512, 1024)
    assert DIMS["imagebind"] == 1024
