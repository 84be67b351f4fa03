"""wandb as a reader uses it: one run per training (two trainings in one process used to share a run
id), named for the experiment and arm, grouped per paper, with the config; files under the results."""
import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

from shared.experiment import cli
from shared.training import EpochSeededSampler, fit, make_trainer


class Regressor(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(4, 1)

    def training_step(self, batch, _):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=1e-2)


class Seen(L.Callback):
    def __init__(self, runs):
        self.runs = runs

    def on_train_start(self, trainer, module):
        import wandb

        self.runs.append((wandb.run.id, wandb.run.name, wandb.run.group, wandb.run.job_type, dict(wandb.run.config)))


def test_two_trainings_in_one_process_are_two_named_runs(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    config = tmp_path / "config.yaml"
    config.write_text("defaults: {seed: 0, lr: 0.01, logging: {wandb: disabled}}\nprofiles: {smoke: {}, tiny: {}, full: {}}\n")
    runs: list = []
    x = torch.randn(32, 4, generator=torch.Generator().manual_seed(0))

    def two_arms(run):
        for arm in ("ours", "baseline"):
            trainer = make_trainer(run.checkpoint_dir(arm, "seed0"), seed=0, max_epochs=1, progress=False,
                                   callbacks=[Seen(runs)])
            fit(trainer, Regressor(), DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8,
                                                 sampler=EpochSeededSampler(32, 0)))
        return {}

    out = tmp_path / "results"
    cli("toy", {"arms": two_arms}, config, ["arms", "--profile", "smoke", "--out", str(out),
                                            "--set", "logging.wandb=offline"])
    import wandb

    assert wandb.run is None   # finished after each training
    ids, names, groups, jobs, configs = zip(*runs)
    assert len(set(ids)) == 2
    assert names == ("arms/ours/seed0", "arms/baseline/seed0") and groups == ("toy", "toy") and jobs == ("arms", "arms")
    assert all(c["lr"] == 0.01 and c["logging"]["wandb"] == "offline" for c in configs)
    assert len(list(out.glob("checkpoints/arms/*/seed0/wandb/offline-run-*"))) == 2
    assert not (tmp_path / "home" / ".cache" / "wandb").exists()   # debug logs and cache stay with the results
