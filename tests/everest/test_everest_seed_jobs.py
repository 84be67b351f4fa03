"""The full profile's job per seed: `<experiment>_seed --seed S` trains and evaluates seed S alone and
records it; the experiment over all seeds then merges those records without training or evaluating,
into the same metrics as one job running the seeds in series (smoke shapes, two seeds)."""
from pathlib import Path

import pytest

from papers.everest.experiments import EXPERIMENTS
from papers.everest.experiments import finetuning as FT
from papers.everest.experiments import pretraining as PT
from shared.config import ConfigError
from shared.experiment import run_experiment

CONFIG = Path(__file__).resolve().parents[2] / "papers" / "everest" / "config.yaml"
SETS = ["seeds=[0, 1]", "finetune.lr_grid=[]", "pretrain.steps=3", "finetune.steps=2", "data.n_test=16",
        "finetune.eval_batch=8"]


def run(name: str, out: Path, seed: int | None = None) -> dict:
    return run_experiment("everest", EXPERIMENTS[name], name, CONFIG, "smoke", out, seed=seed, overrides=SETS)


def test_seed_jobs_then_merge_equal_the_seeds_in_series(tmp_path, monkeypatch):
    series = tmp_path / "series"
    pre_a, fin_a = run("pretrain_everest", series), run("finetune_everest", series)

    jobs = tmp_path / "jobs"
    for seed in (0, 1):
        one = run("pretrain_everest_seed", jobs, seed)
        assert one["seeds"] == [seed] and (jobs / "metrics" / f"pretrain_everest_seed{seed}.json").is_file()
    for seed in (0, 1):
        run("finetune_everest_seed", jobs, seed)
    assert not (jobs / "metrics" / "finetune_everest.json").exists()   # a seed job writes only its own file

    def trains(*_, **__):
        raise AssertionError("the merge trained or evaluated")
    for module, name in ((PT, "pretrain"), (FT, "finetune"), (FT, "evaluate")):
        monkeypatch.setattr(module, name, trains)
    pre_b, fin_b = run("pretrain_everest", jobs), run("finetune_everest", jobs)
    assert fin_b["top1"] == fin_a["top1"] and fin_b["train_loss_final"] == fin_a["train_loss_final"]
    assert pre_b["loss_final"] == pre_a["loss_final"] and pre_b["steps"] == pre_a["steps"] == 3
    assert fin_b["top1"]["n"] == 2


def test_a_seed_job_needs_one_of_the_seeds(tmp_path):
    with pytest.raises(ConfigError, match="not one of seeds"):
        run("pretrain_everest_seed", tmp_path, 7)
