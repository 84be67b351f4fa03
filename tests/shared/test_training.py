"""Trainer factory: determinism, resume after a kill, corrupted checkpoints, loggers."""
import lightning as L
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from shared.loggers import make_loggers
from shared.training import CheckpointError, EpochSeededSampler, fit, last_checkpoint, load_weights, make_trainer


class Killed(RuntimeError):
    pass


class Regressor(L.LightningModule):
    def __init__(self, kill_at_epoch: int | None = None):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.3), torch.nn.Linear(8, 1))
        self.kill_at_epoch = kill_at_epoch

    def training_step(self, batch, _):
        if self.kill_at_epoch is not None and self.current_epoch == self.kill_at_epoch:
            raise Killed("simulated kill")
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-2)


def loader(seed=0):
    g = torch.Generator().manual_seed(123)
    x = torch.randn(64, 4, generator=g)
    y = x.sum(1, keepdim=True)
    return DataLoader(TensorDataset(x, y), batch_size=16, sampler=EpochSeededSampler(64, seed))


def train(out, epochs, kill_at=None, loggers=False):
    torch.manual_seed(0)
    module = Regressor(kill_at)
    trainer = make_trainer(out, seed=0, max_epochs=epochs, progress=False, loggers=loggers)
    resumed = fit(trainer, module, loader())
    return module, resumed


def weights(module):
    return torch.cat([p.detach().flatten() for p in module.parameters()])


def test_same_seed_same_weights(tmp_path):
    a, _ = train(tmp_path / "a", 3)
    b, _ = train(tmp_path / "b", 3)
    assert torch.equal(weights(a), weights(b))


def test_killed_run_resumes_to_the_same_result(tmp_path):
    ref, _ = train(tmp_path / "ref", 4)
    with pytest.raises(Killed):
        train(tmp_path / "run", 4, kill_at=2)
    assert last_checkpoint(tmp_path / "run") is not None
    resumed_module, resumed_from = train(tmp_path / "run", 4)
    assert resumed_from is not None
    assert torch.equal(weights(ref), weights(resumed_module))


def test_corrupted_checkpoint_gives_clear_error(tmp_path):
    train(tmp_path / "run", 1)
    ckpt = last_checkpoint(tmp_path / "run")
    ckpt.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match=r"corrupted or unreadable.*Delete it"):
        train(tmp_path / "run", 2)
    with pytest.raises(CheckpointError):
        load_weights(Regressor(), ckpt)


def test_load_weights_from_lightning_checkpoint(tmp_path):
    module, _ = train(tmp_path / "run", 1)
    fresh = load_weights(Regressor(), last_checkpoint(tmp_path / "run"))
    assert torch.equal(weights(fresh), weights(module))


def test_csv_and_offline_wandb_loggers(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    loggers = make_loggers(tmp_path, "toy", wandb="offline")
    assert [type(lg).__name__ for lg in loggers] == ["CSVLogger", "WandbLogger"]
    train(tmp_path / "run", 3, loggers=loggers)
    assert (tmp_path / "toy" / "metrics.csv").read_text().startswith(("epoch", "step", "train_loss"))
    assert list((tmp_path / "wandb").glob("offline-run-*")), "wandb offline run folder missing"
    assert not (tmp_path / "run" / "wandb").exists()


def test_wandb_disabled_by_default(tmp_path):
    loggers = make_loggers(tmp_path, "toy")
    assert [type(lg).__name__ for lg in loggers] == ["CSVLogger"]
    with pytest.raises(ValueError, match="valid"):
        make_loggers(tmp_path, "toy", wandb="cloud")


def test_sampler_depends_only_on_seed_and_epoch():
    s = EpochSeededSampler(10, seed=3)
    s.set_epoch(2)
    first = list(s)
    s.set_epoch(0)
    s.set_epoch(2)
    assert list(s) == first and sorted(first) == list(range(10))
    s.set_epoch(3)
    assert list(s) != first
