"""Rank search on a toy budget is deterministic; base concepts come from k-means over prompts."""
from pathlib import Path

import torch

from papers.e2gan.experiments import Setup, base_concepts, search_ranks
from shared.config import Config, load_config
from shared.experiment import Run

CONFIG = Path(__file__).resolve().parents[2] / "papers" / "e2gan" / "config.yaml"


def smoke_run(tmp_path):
    cfg = load_config(CONFIG, "smoke", ["data.n_inputs=10", "data.resolution=16"])
    return Run("e2gan", "test", cfg, tmp_path)


def test_rank_search_is_deterministic(tmp_path):
    run = smoke_run(tmp_path)
    setup = Setup(run)
    torch.manual_seed(0)
    G, D = setup.e2gan(), setup.discriminator()
    base = {"G": G.state_dict(), "D": D.state_dict()}
    sets = [(setup.pairs("blue pencil sketch", "train"), setup.pairs("blue pencil sketch", "test"))]
    search = Config.wrap({"steps": 2, "rounds": 2, "multipliers": [2], "min_gain_db": -1e9, "max_rank": 8})
    a = search_ranks(setup, base, sets, search, 1, seed=0, fd_dims=3)
    b = search_ranks(setup, base, sets, search, 1, seed=0, fd_dims=3)
    assert a == b
    assert a["n_probes"] == 1 + 5 + 5  # the start, then one x2 probe per group in each of two rounds
    # min_gain -inf: each round accepts one x2 step (possibly on the same group twice)
    assert int(torch.tensor(list(a["ranks"].values())).prod()) == 4


def test_base_concepts(tmp_path):
    setup = Setup(smoke_run(tmp_path))
    clustered = base_concepts(setup, "clustered")
    assert len(clustered) == len(set(clustered)) == setup.cfg.base.k
    assert base_concepts(setup, "clustered") == clustered
    assert len(base_concepts(setup, "single")) == 1
    assert set(base_concepts(setup, "family")) <= set(__import__("papers.e2gan.teacher", fromlist=["x"]).families()["texture"])
