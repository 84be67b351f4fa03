"""Rank search on a toy budget is deterministic, stays within each layer's useful rank and the FLOP
budget; base concepts come from k-means over prompts."""
from pathlib import Path

import torch

from papers.e2gan.experiments import Setup, base_concepts, search_ranks
from shared.config import Config, load_config
from shared.experiment import Run

CONFIG = Path(__file__).resolve().parents[2] / "papers" / "e2gan" / "config.yaml"


def smoke_run(tmp_path):
    cfg = load_config(CONFIG, "smoke", ["data.n_inputs=10", "data.resolution=16"])
    return Run("e2gan", "test", cfg, tmp_path)


def search_inputs(tmp_path):
    """A smoke Setup, a freshly initialised base (seed 0) and one concept's train/test pairs."""
    setup = Setup(smoke_run(tmp_path))
    torch.manual_seed(0)
    G, D = setup.e2gan(), setup.discriminator()
    base = {"G": G.state_dict(), "D": D.state_dict()}
    concept = "blue pencil sketch"
    return setup, base, [(setup.pairs(concept, "train"), setup.pairs(concept, "test"), concept)]


def test_rank_search_is_deterministic(tmp_path):
    setup, base, sets = search_inputs(tmp_path)
    search = Config.wrap({"steps": 2, "rounds": 2, "multipliers": [2], "min_gain_db": -1e9, "max_flops_ratio": 10.0})
    a = search_ranks(setup, base, sets, search, 1, seeds=[0])
    b = search_ranks(setup, base, sets, search, 1, seeds=[0])
    assert a == b
    assert a["n_probes"] == a["n_trained"] == 1 + 5 + 5  # the start, then one x2 probe per group in each of two rounds
    # min_gain -inf: each round accepts one x2 step (possibly on the same group twice)
    assert int(torch.tensor(list(a["ranks"].values())).prod()) == 4
    assert all(r["rank"] <= r["cap"] for r in a["per_layer"])


def test_rank_search_skips_capped_and_over_budget_candidates(tmp_path):
    """At its useful rank a group is not probed again; a candidate dearer per step than the full
    fine-tune x max_flops_ratio is never trained, and the kept ranks stay within the budget."""
    setup, base, sets = search_inputs(tmp_path)
    caps = search_ranks(setup, base, sets, Config.wrap({"steps": 1, "rounds": 0, "multipliers": [2], "min_gain_db": 0.0,
                                                        "max_flops_ratio": 10.0}), 1, seeds=[0])["caps"]
    # start every group at its cap: every candidate is cut back to the current ranks
    at_cap = search_ranks(setup, base, sets, Config.wrap({"steps": 1, "rounds": 1, "multipliers": [2], "min_gain_db": -1e9,
                                                          "max_flops_ratio": 10.0}), max(caps.values()), seeds=[0])
    assert [h["skipped"] for h in at_cap["history"][1:]] == ["at_cap"] * 5 and at_cap["n_trained"] == 1
    # a budget below the starting ranks' own cost: nothing beyond the start is trained
    tight = search_ranks(setup, base, sets, Config.wrap({"steps": 1, "rounds": 1, "multipliers": [2], "min_gain_db": -1e9,
                                                         "max_flops_ratio": 0.5}), 1, seeds=[0])
    assert {h["skipped"] for h in tight["history"][1:]} == {"over_flops_budget"} and tight["n_trained"] == 1
    free = search_ranks(setup, base, sets, Config.wrap({"steps": 1, "rounds": 1, "multipliers": [2], "min_gain_db": -1e9,
                                                        "max_flops_ratio": 10.0}), 1, seeds=[0])
    assert free["flops_per_step"] > free["history"][0]["flops_per_step"]   # one group doubled: dearer per step


def test_base_concepts(tmp_path):
    setup = Setup(smoke_run(tmp_path))
    clustered = base_concepts(setup, "clustered")
    assert len(clustered) == len(set(clustered)) == setup.cfg.base.k
    assert base_concepts(setup, "clustered") == clustered
    assert len(base_concepts(setup, "single")) == 1
    assert set(base_concepts(setup, "family")) <= set(__import__("papers.e2gan.teacher", fromlist=["x"]).families()["texture"])


def test_one_clustered_base_per_seed(tmp_path):
    """`base.one_per_seed`: the i-th fine-tuning seed adapts base replicate i (its own cache key, so its own
    weights); replicate 0 keeps the single base's key; switched off, every seed adapts replicate 0."""
    from papers.e2gan.experiments.bases import base_key, base_path, base_replicate, base_replicates

    cfg = load_config(CONFIG, "smoke", ["concepts.seeds=[0, 1, 2]"])
    run = Run("e2gan", "test", cfg, tmp_path)
    assert base_replicates(cfg) == 3 and [base_replicate(cfg, s) for s in (0, 1, 2)] == [0, 1, 2]
    assert base_key(run, "clustered", 0) == base_key(run, "clustered") and "replicate" not in base_key(run, "clustered")
    assert len({base_path(run, "clustered", r) for r in range(3)}) == 3
    off = load_config(CONFIG, "smoke", ["concepts.seeds=[0, 1, 2]", "base.one_per_seed=false"])
    assert base_replicates(off) == 1 and {base_replicate(off, s) for s in (0, 1, 2)} == {0}
    # the switch itself is not part of any base's key: turning it on does not retrain replicate 0
    assert base_path(Run("e2gan", "test", off, tmp_path), "clustered") == base_path(run, "clustered")


def test_each_round_keeps_the_largest_gain_per_added_flop(monkeypatch):
    """The objective is PSNR gain per added GFLOP per step, not gain alone: a small gain that costs
    almost no FLOPs beats a larger one that costs many, and a candidate over the FLOP budget is never
    trained. Training and counting are replaced by tables, so only the search's choice is tested."""
    import importlib
    from types import SimpleNamespace

    rs = importlib.import_module("papers.e2gan.experiments.rank_search")
    groups = ("down", "ds", "tb", "us", "up")
    cost = {"down": 50e6, "ds": 1e6, "tb": 1e6, "us": 1e6, "up": 1e6}      # FLOPs per step per unit of rank
    gain = {"down": 0.2, "ds": 0.1, "tb": -0.01, "us": -0.01, "up": -0.01}  # dB when the group's rank doubles
    trained = []

    def flops(setup, ranks, prompt):
        return int(1000e6 if ranks is None else 500e6 + sum(cost[g] * r for g, r in ranks.items()))

    def finetune(setup, base, arm, ranks, train, test, steps, seed, concept=None):
        trained.append(dict(ranks))
        return dict(ranks), {"steps": steps, "flops_per_step": flops(setup, ranks, concept)}

    monkeypatch.setattr(rs, "finetune", finetune)
    monkeypatch.setattr(rs, "step_flops", flops)
    monkeypatch.setattr(rs, "eval_psnr", lambda G, test: 10.0 + sum(gain[g] for g, r in G.items() if r > 2))
    monkeypatch.setattr(rs, "lora_layers", lambda setup: {g: {"group": g, "cap": 8, "params_per_rank": 10} for g in groups})
    monkeypatch.setattr(rs, "per_layer_ranks", lambda setup, ranks: [])
    monkeypatch.setattr(rs, "lora_alpha", lambda cfg: 2.0)
    setup = SimpleNamespace(cfg=None)
    sets = [(None, None, "c1"), (None, None, "c2")]
    cfg = {"steps": 1, "rounds": 1, "multipliers": [2], "min_gain_db": 0.0, "max_flops_ratio": 1.0}
    out = rs.search_ranks(setup, {}, sets, Config.wrap(cfg), 2, seeds=[0, 1])
    assert out["ranks"] == {"down": 2, "ds": 4, "tb": 2, "us": 2, "up": 2}   # 50 dB/GFLOP beats down's 2 dB/GFLOP
    assert len(trained) == 6 * 2 * 2        # the start and 5 candidates, each on 2 concepts x 2 seeds
    # a budget of 650 M FLOPs per step: down x2 (708 M) is skipped untrained
    trained.clear()
    out = rs.search_ranks(setup, {}, sets, Config.wrap({**cfg, "max_flops_ratio": 0.65}), 2, seeds=[0, 1])
    skipped = {h["group"]: h["skipped"] for h in out["history"][1:]}
    assert skipped["down"] == "over_flops_budget" and all(r["down"] == 2 for r in trained)
    assert out["flops_per_step"] <= out["flops_budget_per_step"]
