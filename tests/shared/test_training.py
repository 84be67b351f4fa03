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
    from lightning.pytorch.loggers import CSVLogger, WandbLogger

    monkeypatch.delenv("WANDB_MODE", raising=False)     # offline comes from the argument, not the env
    loggers = make_loggers(tmp_path, "toy", wandb="offline")
    assert len(loggers) == 2 and isinstance(loggers[0], CSVLogger) and isinstance(loggers[1], WandbLogger)
    train(tmp_path / "run", 3, loggers=loggers)
    assert (tmp_path / "toy" / "metrics.csv").read_text().startswith(("epoch", "step", "train_loss"))
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert runs, "wandb offline run folder missing"
    assert list(runs[0].glob("run-*.wandb")), "no .wandb file for `wandb sync` to upload"
    assert not (tmp_path / "run" / "wandb").exists()


def test_wandb_disabled_by_default(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    loggers = make_loggers(tmp_path, "toy")
    assert len(loggers) == 1 and "CSV" in type(loggers[0]).__name__
    monkeypatch.setenv("WANDB_MODE", "disabled")       # CI: the environment turns wandb off
    assert len(make_loggers(tmp_path, "toy", wandb="offline")) == 1
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


class StepKilled(Regressor):
    """Raises at optimiser step `kill_at_step` (mid-epoch), after a step checkpoint was written."""

    def __init__(self, kill_at_step=None):
        super().__init__()
        self.kill_at_step = kill_at_step

    def training_step(self, batch, i):
        if self.kill_at_step is not None and self.global_step == self.kill_at_step:
            raise Killed("simulated kill")
        return super().training_step(batch, i)


def train_steps(out, kill_at_step=None, every=3):
    torch.manual_seed(0)
    module = StepKilled(kill_at_step)
    trainer = make_trainer(out, seed=0, max_epochs=3, progress=False, every_n_train_steps=every, log_every_n_steps=1)
    return module, fit(trainer, module, loader())


def test_killed_mid_epoch_resumes_to_the_same_weights_and_log(tmp_path):
    ref, _ = train_steps(tmp_path / "ref")
    with pytest.raises(Killed):
        train_steps(tmp_path / "run", kill_at_step=7)          # epoch 1 of 4 batches each; checkpoint at step 6
    ckpt = torch.load(last_checkpoint(tmp_path / "run"), weights_only=True)
    assert ckpt["global_step"] == 6 and ckpt["cache_key"]["seed"] == 0
    assert ckpt["loops"]["fit_loop"]["state_dict"]["combined_loader"] == [{"epoch": 1, "batches": 2}]
    resumed, resumed_from = train_steps(tmp_path / "run")
    assert resumed_from is not None
    assert torch.equal(weights(ref), weights(resumed))
    log = lambda d: (d / "logs" / "metrics.csv").read_text()  # noqa: E731
    assert log(tmp_path / "run") == log(tmp_path / "ref") and log(tmp_path / "ref").count("\n") == 13


def test_fresh_run_replaces_an_old_log(tmp_path):
    train_steps(tmp_path / "run")
    (tmp_path / "run" / "checkpoints" / "last.ckpt").unlink()
    train_steps(tmp_path / "run")
    assert (tmp_path / "run" / "logs" / "metrics.csv").read_text().count("\n") == 13


def test_trainer_options_from_config():
    from shared.training import trainer_options

    cfg = {"trainer": {"accelerator": "cpu", "devices": 2, "strategy": "ddp", "num_nodes": 1,
                       "every_n_train_steps": 5, "precision": None}, "logging": {"wandb": "offline"}}
    assert trainer_options(cfg) == {"accelerator": "cpu", "devices": 2, "strategy": "ddp", "num_nodes": 1,
                                    "every_n_train_steps": 5, "wandb": "offline"}
    assert trainer_options({}) == {}
    with pytest.raises(ValueError, match="unknown trainer keys"):
        trainer_options({"trainer": {"gpus": 2}})


def test_ddp_needs_a_sharding_sampler(tmp_path):
    trainer = make_trainer(tmp_path, seed=0, max_epochs=1, progress=False, accelerator="cpu", devices=2,
                           strategy="ddp")
    plain = DataLoader(TensorDataset(torch.zeros(8, 4), torch.zeros(8, 1)), batch_size=4, shuffle=True)
    with pytest.raises(ValueError, match="shards itself"):
        fit(trainer, Regressor(), plain)


def test_run_options_are_the_defaults_and_explicit_arguments_win(tmp_path):
    from shared.training import RUN_OPTIONS, set_run_options

    try:
        set_run_options({"every_n_train_steps": 2, "accelerator": "cpu"})
        trainer = make_trainer(tmp_path / "a", seed=0, max_epochs=1, progress=False)
        steps = [c._every_n_train_steps for c in trainer.checkpoint_callbacks]
        assert sorted(steps) == [0, 2] and type(trainer.accelerator).__name__ == "CPUAccelerator"
        trainer = make_trainer(tmp_path / "b", seed=0, max_epochs=1, progress=False, every_n_train_steps=5)
        assert sorted(c._every_n_train_steps for c in trainer.checkpoint_callbacks) == [0, 5]
        with pytest.raises(ValueError, match="unknown trainer options"):
            set_run_options({"gpus": 1})
    finally:
        RUN_OPTIONS.clear()
    assert len(make_trainer(tmp_path / "c", seed=0, max_epochs=1, progress=False).checkpoint_callbacks) == 1


def test_checkpoint_false_writes_no_checkpoint_and_trains_the_same(tmp_path):
    """A throw-away fit (checkpoint=False) leaves no checkpoint to resume from and gives the same
    weights as a checkpointed fit."""
    ref, _ = train(tmp_path / "ref", 2)
    torch.manual_seed(0)
    module = Regressor()
    trainer = make_trainer(tmp_path / "run", seed=0, max_epochs=2, progress=False, loggers=False, checkpoint=False,
                           every_n_train_steps=1)
    fit(trainer, module, loader())
    assert last_checkpoint(tmp_path / "run") is None
    assert not list((tmp_path / "run").rglob("*.ckpt"))
    assert torch.equal(weights(ref), weights(module))
