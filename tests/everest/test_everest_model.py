"""Model: loss on targets only, normalised targets, classifier pruning, FLOP/memory accounting, resume."""
from pathlib import Path

import pytest
import torch
from einops import rearrange

from papers.everest.efficiency import (VitDims, counted_flops, finetune_macs, pretrain_macs,
                                       saved_activation_bytes, vit_b_table)
from papers.everest.model import (MaskedVideoAutoencoder, VideoClassifier, VideoEncoder, normalised_targets,
                                  patchify, reconstruct)
from papers.everest.selection import select_tokens, tube_mask
from papers.everest.recipe import make_masks
from papers.everest.train import pretrain
from shared.config import load_config

CONFIG = Path(__file__).resolve().parents[2] / "papers" / "everest" / "config.yaml"


def small_model(seed=0):
    torch.manual_seed(seed)
    enc = VideoEncoder(1, 16, 32, 8, 2, dim=32, depth=1, heads=2)
    return MaskedVideoAutoencoder(enc, 16, 1, 2)


def test_normalised_targets_reference():
    video = torch.rand(2, 3, 4, 16, 16)
    mask = torch.zeros(2, 2 * 2 * 2, dtype=torch.bool)           # T' = 2 slices, L = 4 positions
    mask[:, [1, 5, 6]] = True
    out = normalised_targets(video, mask, patch=8, tubelet=2)
    assert out.shape == (2, 3, 2 * 8 * 8 * 3)
    # token 5 = slice 1, row 0, col 1
    tub = video[0, :, 2:4, 0:8, 8:16].reshape(3, -1)            # [C, 128]
    ref = (tub - tub.mean(1, keepdim=True)) / (tub.std(1, unbiased=True, keepdim=True) + 1e-6)
    got = out[0, 1].view(2 * 8 * 8, 3).T
    torch.testing.assert_close(got, ref)


def test_loss_covers_targets_only():
    model = small_model().eval()
    video = torch.rand(2, 1, 16, 32, 32, generator=torch.Generator().manual_seed(0))
    e = model.embed(video)
    vis, tgt = select_tokens(torch.rand(2, 8, 16, generator=torch.Generator().manual_seed(1)), 0.3, 0.9,
                             torch.Generator().manual_seed(2), num_visible=16)
    base = model(video, vis, tgt, embeddings=e)
    patches = patchify(video, 8, 2)
    discarded = ~(vis | tgt)
    for mask, changes in [(discarded, False), (tgt, True)]:
        p = patches.clone()
        p[mask] = torch.rand_like(p[mask])
        v2 = rearrange(p, "b (t h w) (p0 p1 p2) c -> b c (t p0) (h p1) (w p2)", t=8, h=4, w=4, p0=2, p1=8, p2=8)
        loss = model(v2, vis, tgt, embeddings=model.embed(v2))
        assert (not torch.allclose(loss, base)) == changes
    pred = model.predict(e, vis, tgt)
    assert pred.shape == (2, int(tgt[0].sum()), 2 * 8 * 8)


def test_decoder_token_counts():
    model = small_model()
    video = torch.rand(2, 1, 16, 32, 32)
    seen = []
    model.decoder[0].register_forward_hook(lambda m, i, o: seen.append(o.shape[1]))
    cfg = load_config(CONFIG, "smoke")
    for method in ("tube", "everest"):
        e, vis, tgt = make_masks(model, video, method, cfg.selection, torch.Generator().manual_seed(0))
        model(video, vis, tgt, embeddings=e)
    assert seen == [128, 38]


def test_classifier_pruning_tokens():
    torch.manual_seed(0)
    enc = VideoEncoder(1, 16, 32, 8, 2, dim=32, depth=1, heads=2)
    seen = []
    enc.blocks[0].register_forward_hook(lambda m, i, o: seen.append(o.shape[1]))
    video = torch.rand(2, 1, 16, 32, 32)
    for prune in ("none", "top", "bottom", "random"):
        assert VideoClassifier(enc, 8, prune=prune)(video, torch.Generator().manual_seed(0)).shape == (2, 8)
    assert seen == [128, 76, 76, 76]


def test_flop_counter_matches_analytic():
    model = small_model()
    video = torch.rand(3, 1, 16, 32, 32)
    d = VitDims(128, 128, 32, 1, 16, 1, num_classes=8)
    vis, tgt = tube_mask(3, 8, 16, 0.9)
    flops = counted_flops(lambda: model(video, vis, tgt))
    assert flops == 2 * 3 * pretrain_macs(d, 16, 128, 112)["total"]
    vis, tgt = select_tokens(torch.rand(3, 8, 16), 0.3, 0.9, num_visible=16)
    assert counted_flops(lambda: model(video, vis, tgt)) == 2 * 3 * pretrain_macs(d, 16, 38, 22)["total"]
    clf = VideoClassifier(model.encoder, 8, prune="top")
    assert counted_flops(lambda: clf(video)) == 2 * 3 * finetune_macs(d, 76)["total"]


def test_vit_b_analytic_matches_paper():
    pre, ft = vit_b_table()
    assert abs(pre["videomae_gmacs"] - 35.4) < 0.1 and abs(pre["everest_gmacs"] - 19.8) < 0.1
    assert abs(ft["videomae_gmacs"] - 180.3) < 0.1 and abs(ft["everest_gmacs"] - 98.0) < 0.1


def test_saved_activation_bytes():
    model = small_model()
    video = torch.rand(2, 1, 16, 32, 32)
    params = list(model.parameters())
    x = torch.randn(4, 5, requires_grad=True)
    assert saved_activation_bytes(lambda: (x * x).sum(), params) == 4 * 5 * 4
    w = torch.nn.Parameter(torch.randn(5, 5))
    assert saved_activation_bytes(lambda: (x @ w).sum(), [w]) == 4 * 5 * 4   # the parameter is excluded
    tube = saved_activation_bytes(lambda: model(video, *tube_mask(2, 8, 16, 0.9)), params)
    ev = saved_activation_bytes(lambda: model(video, *select_tokens(torch.rand(2, 8, 16), 0.3, 0.9, num_visible=16)), params)
    assert 0 < ev < tube


def test_reconstruct_shapes_and_visible_copy():
    model = small_model()
    video = torch.rand(1, 1, 16, 32, 32)
    vis, tgt = select_tokens(torch.rand(1, 8, 16), 0.3, 0.9, num_visible=16)
    out = reconstruct(model, video, vis, tgt)
    assert out.shape == video.shape
    torch.testing.assert_close(patchify(out, 8, 2)[vis], patchify(video, 8, 2)[vis])
    assert (patchify(out, 8, 2)[~(vis | tgt)] == 0).all()


class Killed(RuntimeError):
    pass


def test_pretrain_deterministic_and_resumes_exactly(tmp_path, monkeypatch):
    """A kill mid-run (after the step-2 checkpoint) resumes to the same losses and weights; the resume
    restores the mask generator and the batch position, not only the weights."""
    import papers.everest.modules as train
    from papers.everest.data import make_clips

    cfg = load_config(CONFIG, "smoke", ["pretrain.steps=5", "trainer.every_n_train_steps=2", "pretrain.batch=4"])
    data = make_clips(16, 0)
    runs = {}
    for name in ("a", "b"):
        model = small_model()
        runs[name] = (pretrain(model, data, "everest", cfg, 0, tmp_path / name), model.state_dict())
    assert runs["a"][0] == runs["b"][0] and len(runs["a"][0]) == 5
    assert all(torch.equal(v, runs["b"][1][k]) for k, v in runs["a"][1].items())

    real_step = train.PretrainModule.training_step

    def killed_at_step_3(self, batch, i):
        if self.global_step == 3:
            raise Killed
        return real_step(self, batch, i)

    monkeypatch.setattr(train.PretrainModule, "training_step", killed_at_step_3)
    with pytest.raises(Killed):
        pretrain(small_model(), data, "everest", cfg, 0, tmp_path / "c")
    root = train.run_root(tmp_path / "c", cfg)                  # step checkpoints under run-<config hash>
    assert torch.load(root / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 2
    monkeypatch.setattr(train.PretrainModule, "training_step", real_step)
    model = small_model(seed=1)                                 # weights must come from last.ckpt
    losses = pretrain(model, data, "everest", cfg, 0, tmp_path / "c")
    assert losses == runs["a"][0]
    assert all(torch.equal(v, runs["a"][1][k]) for k, v in model.state_dict().items())
    log = (root / "logs" / "metrics.csv").read_text()
    assert log == (train.run_root(tmp_path / "a", cfg) / "logs" / "metrics.csv").read_text() and log.count("\n") == 6


def test_pretrain_with_frame_selection_runs(tmp_path):
    from papers.everest.data import make_clips

    cfg = load_config(CONFIG, "smoke", ["pretrain.steps=2", "pretrain.batch=2"])
    data = make_clips(4, 0, frames=24, speed=1.0, rest=0.5)          # 2·α·τ = 24 candidate frames
    for frames in ("information", "uniform"):
        (tmp_path / frames).mkdir()
        losses = pretrain(small_model(), data, "everest", cfg, 0, tmp_path / frames, frames=frames)
        assert len(losses) == 2 and all(l > 0 for l in losses)


def test_fused_attention_matches_explicit_and_saves_less():
    from papers.everest.efficiency import flops_and_saved_bytes
    from papers.everest.model import set_fused_attention

    model = small_model()
    video = torch.rand(2, 1, 16, 32, 32)
    vis, tgt = tube_mask(2, 8, 16, 0.9, torch.Generator().manual_seed(0))
    params = list(model.parameters())
    explicit = model(video, vis, tgt)
    flops, saved = flops_and_saved_bytes(lambda: model(video, vis, tgt), params)
    assert flops == counted_flops(lambda: model(video, vis, tgt))
    assert saved == saved_activation_bytes(lambda: model(video, vis, tgt), params)
    set_fused_attention(model, True)
    torch.testing.assert_close(model(video, vis, tgt), explicit)
    assert saved_activation_bytes(lambda: model(video, vis, tgt), params) < saved


def test_checkpoint_of_another_config_is_not_resumed(tmp_path):
    from papers.everest.data import make_clips
    from papers.everest.modules import cache_config, run_root
    from shared.config import config_hash

    data = make_clips(8, 0)
    cfg = load_config(CONFIG, "smoke", ["pretrain.steps=2", "pretrain.batch=2"])
    pretrain(small_model(), data, "everest", cfg, 0, tmp_path)
    other = load_config(CONFIG, "smoke", ["pretrain.steps=2", "pretrain.batch=2", "pretrain.lr=0.01"])
    model = small_model(seed=3)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    losses = pretrain(model, data, "everest", other, 0, tmp_path)
    assert len(losses) == 2 and any(not torch.equal(v, before[k]) for k, v in model.state_dict().items())
    key = torch.load(run_root(tmp_path, other) / "checkpoints" / "last.ckpt", weights_only=True)["cache_key"]
    assert key == {"config_hash": config_hash(cache_config(other)), "seed": 0}
    assert (run_root(tmp_path, cfg) / "checkpoints" / "last.ckpt").is_file()   # the other config's, kept
    # the checkpoint interval is not part of the key: a rerun with another interval resumes
    again = load_config(CONFIG, "smoke", ["pretrain.steps=2", "pretrain.batch=2", "pretrain.lr=0.01",
                                          "trainer.every_n_train_steps=1"])
    assert cache_config(again) == cache_config(other)
