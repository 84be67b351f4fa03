"""train_survival (Lightning, through shared.training) against a plain-torch loop of the official recipe,
bit for bit; its sampler, schedule, loss curves, and resume from a finished fit's checkpoint."""
import math

import numpy as np
import pytest
import torch

from conftest import REPO
from papers.mmp.losses import cox_loss, nll_bins, nll_loss, to_bins
from papers.mmp.survival_module import LoopOrderSampler, warmup_cosine
from papers.mmp.batches import make_batch
from papers.mmp.train import predict_risk, train_survival
from shared.config import load_config
from shared.seeding import derive_seed

CFG = REPO / "papers" / "mmp" / "config.yaml"


def reference_fit(model, data, time, event, *, loss, epochs, batch_size, lr, weight_decay, seed, alpha=0.5):
    """The recipe by hand: AdamW, no decay on 1-D parameters and biases; linear warm-up over one epoch,
    then cosine, stepped per batch; shuffles from (seed, "epoch", epoch), dropout from (seed, "step", step)."""
    n = len(time)
    named = list(model.named_parameters())
    decay = [p for k, p in named if p.ndim > 1 and not k.endswith("bias")]
    rest = [p for k, p in named if not (p.ndim > 1 and not k.endswith("bias"))]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                             {"params": rest, "weight_decay": 0.0}], lr=lr)
    warm = math.ceil(n / batch_size)
    total = epochs * warm
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm else 0.5 * (1 + math.cos(math.pi * (s - warm) / max(1, total - warm))))
    bins = to_bins(time, nll_bins(time, event)) if loss == "nll" else None
    step = 0
    model.train()
    for epoch in range(epochs):
        order = torch.randperm(n, generator=torch.Generator().manual_seed(derive_seed(seed, "epoch", epoch))).numpy()
        for start in range(0, n, batch_size):
            idx = order[start:start + batch_size]
            torch.manual_seed(derive_seed(seed, "step", step))
            out = model(make_batch(data, idx))
            if loss == "cox":
                value = cox_loss(out[:, 0], torch.as_tensor(time[idx]), torch.as_tensor(event[idx]))
            else:
                value = nll_loss(out, bins[idx], torch.as_tensor(event[idx]), alpha=alpha)
            opt.zero_grad()
            value.backward()
            opt.step()
            sched.step()
            step += 1
    model.eval()


@pytest.fixture(scope="module")
def fold():
    from papers.mmp.data import make_cohort, site_folds
    from papers.mmp.experiments.arms import prepare_fold

    cfg = load_config(CFG, "smoke")
    cohort = make_cohort(cfg.data, 0)
    tr, te = site_folds(cohort.site, cfg.eval.n_folds)[0]
    return cfg, cohort, tr, te, prepare_fold(cohort, tr, cfg, 0, 0)


def build(cfg, cohort, arm, n_out=1):
    from papers.mmp.experiments.arms import build_model

    return build_model(arm, cfg, cohort, n_out, seed=7)


@pytest.mark.parametrize("arm,loss,batch_size", [("mmp_trans", "cox", 16),
                                                 ("abmil", "cox", 16), ("mmp_trans", "nll", 4)])
def test_train_survival_trains_bit_for_bit_like_the_hand_written_recipe(fold, arm, loss, batch_size):
    cfg, cohort, tr, te, fd = fold
    data = make_batch(fd["data"], tr)
    n_out = 1 if loss == "cox" else cfg.train.n_bins
    kw = dict(loss=loss, epochs=3, batch_size=batch_size, lr=cfg.train.lr, weight_decay=0.01, seed=11)
    ours, ref = build(cfg, cohort, arm, n_out), build(cfg, cohort, arm, n_out)
    state = train_survival(ours, data, cohort.time[tr], cohort.event[tr], **kw)
    reference_fit(ref, data, cohort.time[tr], cohort.event[tr], **kw)
    for (name, a), b in zip(ours.state_dict().items(), ref.state_dict().values()):
        assert torch.equal(a, b), f"{arm}/{loss}: {name} differs from the hand-written loop"
    np.testing.assert_array_equal(predict_risk(ours, fd["data"], te, state),
                                  predict_risk(ref, fd["data"], te, {"loss": loss}))
    steps_per_epoch = math.ceil(len(tr) / batch_size)      # one CSV row per step, in order
    assert [r["step"] for r in state["curve"]] == list(range(3 * steps_per_epoch))
    assert [r["epoch"] for r in state["curve"]] == [s // steps_per_epoch for s in range(3 * steps_per_epoch)]


def test_loop_order_sampler_keeps_the_loop_shuffles_and_shards_disjointly():
    n, seed = 13, 5
    one = LoopOrderSampler(n, seed)
    for epoch in (0, 3):
        one.set_epoch(epoch)
        perm = torch.randperm(n, generator=torch.Generator().manual_seed(derive_seed(seed, "epoch", epoch))).tolist()
        assert list(one) == perm
        shards = []
        for rank in (0, 1):
            s = LoopOrderSampler(n, seed, num_replicas=2, rank=rank)
            s.set_epoch(epoch)
            shards.append(list(s))
        assert len(shards[0]) == len(shards[1]) == 7                  # padded like DistributedSampler
        assert set(shards[0][:6]).isdisjoint(shards[1][:6])
        assert sorted(set(shards[0]) | set(shards[1])) == list(range(n))
    one.set_epoch(0)
    first = list(one)
    one.set_epoch(1)
    assert list(one) != first


def test_warmup_cosine_schedule():
    f = warmup_cosine(4, 20)
    assert [f(s) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert f(4) == 1.0 and f(12) == pytest.approx(0.5) and f(20) == pytest.approx(0.0, abs=1e-12)


def test_checkpointed_fit_resumes_only_under_its_own_key(fold, tmp_path, caplog):
    cfg, cohort, tr, te, fd = fold
    data = make_batch(fd["data"], tr)
    kw = dict(loss="cox", epochs=2, batch_size=16, lr=cfg.train.lr, weight_decay=0.01, seed=3,
              out_dir=tmp_path, options={"every_n_train_steps": 1}, cache_config={"arm": "mmp_trans"})
    first = build(cfg, cohort, "mmp_trans")
    state = train_survival(first, data, cohort.time[tr], cohort.event[tr], **kw)
    assert (tmp_path / "checkpoints" / "last.ckpt").is_file()
    # a rerun into the same folder restores the finished fit from its checkpoint: an untrained model
    # ends with the trained weights and the same curve, without training again
    again = build(cfg, cohort, "mmp_trans")
    assert not torch.equal(again.state_dict()["head.weight"], first.state_dict()["head.weight"])
    state2 = train_survival(again, data, cohort.time[tr], cohort.event[tr], **kw)
    for a, b in zip(first.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b)
    assert state2["curve"] == state["curve"]
    # another config: the checkpoint is stale, one logged line says why, and the fit starts fresh
    other = build(cfg, cohort, "mmp_trans")
    with caplog.at_level("WARNING", logger="shared.run_cache"):
        train_survival(other, data, cohort.time[tr], cohort.event[tr], **{**kw, "cache_config": {"arm": "x"}, "lr": 0.0})
    assert "config hash" in caplog.text
    assert not torch.equal(other.state_dict()["head.weight"], first.state_dict()["head.weight"])


def test_throw_away_fits_write_no_checkpoint(fold, tmp_path, monkeypatch):
    cfg, cohort, tr, te, fd = fold
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    seen = []
    from lightning.pytorch.callbacks import Callback

    class Spy(Callback):
        def on_train_end(self, trainer, pl_module):
            seen.append([type(c).__name__ for c in trainer.callbacks])

    import shared.training

    make = shared.training.make_trainer
    monkeypatch.setattr(shared.training, "make_trainer", lambda *a, **k: make(*a, **{**k, "callbacks": [Spy()]}))
    train_survival(build(cfg, cohort, "pathway"), make_batch(fd["data"], tr), cohort.time[tr], cohort.event[tr],
                   loss="cox", epochs=1, batch_size=16, lr=1e-3, weight_decay=0.0, seed=0,
                   options={"every_n_train_steps": 1})
    assert seen and "ModelCheckpoint" not in seen[0]
    assert not list(tmp_path.rglob("*.ckpt"))


def test_more_than_one_process_is_refused(fold):
    cfg, cohort, tr, te, fd = fold
    with pytest.raises(ValueError, match="one process"):
        train_survival(build(cfg, cohort, "pathway"), make_batch(fd["data"], tr), cohort.time[tr], cohort.event[tr],
                       loss="cox", epochs=1, batch_size=16, lr=1e-3, weight_decay=0.0, seed=0,
                       options={"devices": 2, "strategy": "ddp"})
