"""Caches keyed by config hash and seed: `shared.run_cache`, and keyed resume in `shared.training.fit`."""
import logging

import lightning as L
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from shared import run_cache
from shared.training import EpochSeededSampler, fit, last_checkpoint, make_trainer


class Killed(RuntimeError):
    pass


class Regressor(L.LightningModule):
    def __init__(self, lr: float, kill_at_epoch: int | None = None):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
        self.lr, self.kill_at_epoch = lr, kill_at_epoch

    def training_step(self, batch, _):
        if self.kill_at_epoch is not None and self.current_epoch == self.kill_at_epoch:
            raise Killed("simulated kill")
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)


def train(out, cfg, seed=0, kill_at=None):
    """One keyed training run of `cfg` = {"lr", "epochs"}; returns (module, resumed-from)."""
    torch.manual_seed(seed)
    module = Regressor(cfg["lr"], kill_at)
    g = torch.Generator().manual_seed(123)
    x = torch.randn(64, 4, generator=g)
    loader = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=16, sampler=EpochSeededSampler(64, seed))
    trainer = make_trainer(out, seed=seed, max_epochs=cfg["epochs"], progress=False, cache_config=cfg)
    return module, fit(trainer, module, loader)


def weights(module):
    return torch.cat([p.detach().flatten() for p in module.parameters()])


def test_save_load_reuses_only_a_matching_key(tmp_path, caplog):
    path = tmp_path / "bond.pt"
    key = run_cache.cache_key({"steps": 500}, seed=1)
    run_cache.save(path, {"w": torch.ones(3)}, key)
    assert torch.equal(run_cache.load(path, key)["w"], torch.ones(3))
    with caplog.at_level(logging.WARNING, logger="shared.run_cache"):
        assert run_cache.load(path, run_cache.cache_key({"steps": 300}, seed=1), what="bond c_E1") is None
        assert run_cache.load(path, run_cache.cache_key({"steps": 500}, seed=2), what="bond c_E1") is None
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and all(line.startswith("bond c_E1: not reused, retraining") for line in lines)
    assert "config hash" in lines[0] and "seed 1" in lines[1] and "seed 2" in lines[1]
    run_cache.key_file(path).unlink()  # a cache written before caches were keyed
    assert run_cache.stale_reason(path, key).endswith("what made it is unknown")
    assert run_cache.load(tmp_path / "missing.pt", key) is None
    # the key is the config's hash: order-independent, sensitive to any value
    assert run_cache.cache_key({"a": 1, "b": 2}, 0) == run_cache.cache_key({"b": 2, "a": 1}, 0)
    assert run_cache.cache_key({"a": 1}, 0) != run_cache.cache_key({"a": 1.5}, 0)


def test_fit_resumes_only_with_the_same_config_and_seed(tmp_path, caplog):
    cfg = {"lr": 1e-2, "epochs": 4}
    edited = {"lr": 3e-3, "epochs": 4}
    ref_edited, _ = train(tmp_path / "ref", edited)
    # a run of the original config is killed half way, leaving its last.ckpt
    with pytest.raises(Killed):
        train(tmp_path / "run", cfg, kill_at=2)
    assert last_checkpoint(tmp_path / "run") is not None
    # the edited config reruns into the same folder: it must not continue the old run
    with caplog.at_level(logging.WARNING, logger="shared.run_cache"):
        module, resumed = train(tmp_path / "run", edited)
    assert resumed is None
    assert torch.equal(weights(module), weights(ref_edited))  # the same as training the edit from scratch
    assert sum("not reused, retraining" in r.getMessage() and "config hash" in r.getMessage()
               for r in caplog.records) == 1
    # another seed does not resume either
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="shared.run_cache"):
        _, resumed = train(tmp_path / "run", edited, seed=1)
    assert resumed is None and any("seed 0" in r.getMessage() for r in caplog.records)


def test_fit_still_resumes_a_killed_run_of_the_same_config(tmp_path):
    cfg = {"lr": 1e-2, "epochs": 4}
    ref, _ = train(tmp_path / "ref", cfg)
    with pytest.raises(Killed):
        train(tmp_path / "run", cfg, kill_at=2)
    module, resumed = train(tmp_path / "run", cfg)
    assert resumed is not None
    assert torch.equal(weights(module), weights(ref))


def test_a_stale_checkpoint_is_not_deleted_under_other_ranks(tmp_path, monkeypatch):
    """Under DDP every rank reads last.ckpt to decide; rank 0 deleting a stale one raced the others'
    reads. It stays until the new run's first checkpoint overwrites it."""
    with pytest.raises(Killed):
        train(tmp_path / "run", {"lr": 1e-2, "epochs": 4}, kill_at=2)
    stale = last_checkpoint(tmp_path / "run")
    seen = []
    real_fit = L.Trainer.fit

    def fit_and_look(self, *args, **kwargs):
        seen.append(stale.exists())   # what a slower rank would find when it starts
        return real_fit(self, *args, **kwargs)

    monkeypatch.setattr(L.Trainer, "fit", fit_and_look)
    _, resumed = train(tmp_path / "run", {"lr": 3e-3, "epochs": 4})
    assert resumed is None and seen == [True]
    assert torch.load(stale, weights_only=True)["cache_key"]["config_hash"] == run_cache.cache_key(
        {"lr": 3e-3, "epochs": 4}, 0)["config_hash"]   # overwritten by the new run
