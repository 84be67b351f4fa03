"""The comparison protocol: plateau stopping, interpolated steps-to-target, common random numbers
across arms, rank draws matched in size, geometric-mean FLOP ratios, relative layer change."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from papers.e2gan.experiments import Setup, arm_ranks, count_lora_params, finetune, geomean, relative_change
from papers.e2gan.experiments.arms import all_layer_ranks, arm_budget
from papers.e2gan.models import CRUCIAL_GROUPS, E2GANGenerator, PatchDiscriminator
from papers.e2gan.ranks import group_caps, matched_random_ranks, rank_params
from papers.e2gan.train import Pairs, to_target, train_gan
from shared.config import load_config
from shared.experiment import Run

CONFIG = Path(__file__).resolve().parents[2] / "papers" / "e2gan" / "config.yaml"


def toy_pairs(n=8, res=16):
    torch.manual_seed(0)
    x = torch.rand(n, 3, res, res) * 2 - 1
    return Pairs(x, -x, torch.randn(1, 2, 8), torch.ones(1, 2, dtype=torch.bool), torch.zeros(n, dtype=torch.long))


def test_to_target_interpolates_between_evaluations():
    h = {"curve": [(0, 10.0), (100, 12.0), (200, 14.0)], "seconds": [0.0, 1.0, 2.0], "steps": 200,
         "flops_per_step": 10}
    t = to_target(h, 13.0)
    assert t["reached"] and t["steps"] == pytest.approx(150) and t["seconds"] == pytest.approx(1.5)
    assert t["flops"] == pytest.approx(1500)
    assert to_target(h, 14.0)["steps"] == pytest.approx(200)
    miss = to_target(h, 15.0)
    assert not miss["reached"] and miss["steps"] == 200 and miss["flops"] == 2000
    # already above the target before training: charged the first evaluation interval
    assert to_target(h, 9.0)["steps"] == 100


def test_plateau_and_stop_at_end_training_early():
    pairs = toy_pairs()
    G, D = E2GANGenerator(4, 8, 2), PatchDiscriminator(8)
    # an unreachable min_delta: every evaluation is "no gain" after the first, so patience 2 stops at 3 evals
    h = train_gan(G, D, pairs, 50, seed=0, batch_size=4, test=pairs, eval_every=2, patience=2, min_delta=1e9)
    assert h["steps"] == 6 and h["max_steps"] == 50 and [s for s, _ in h["curve"]] == [0, 2, 4, 6]
    h = train_gan(E2GANGenerator(4, 8, 2), PatchDiscriminator(8), pairs, 50, seed=0, batch_size=4, test=pairs,
                  eval_every=2, stop_at=-1e9)
    assert h["steps"] == 2


def test_minibatch_order_depends_on_the_seed_not_the_model():
    pairs = toy_pairs()
    a = train_gan(E2GANGenerator(4, 8, 2), PatchDiscriminator(8), pairs, 3, seed=5, batch_size=4)
    b = train_gan(E2GANGenerator(8, 8, 2), PatchDiscriminator(4), pairs, 3, seed=5, batch_size=4)
    c = train_gan(E2GANGenerator(4, 8, 2), PatchDiscriminator(8), pairs, 3, seed=6, batch_size=4)
    assert a["batch_digest"] == b["batch_digest"] != c["batch_digest"]


def smoke_setup(tmp_path):
    cfg = load_config(CONFIG, "smoke", ["data.n_inputs=10", "data.resolution=16"])
    return Setup(Run("e2gan", "test", cfg, tmp_path))


def test_all_arms_of_one_concept_share_minibatches(tmp_path):
    setup = smoke_setup(tmp_path)
    torch.manual_seed(0)
    base = {"G": setup.e2gan().state_dict(), "D": setup.discriminator().state_dict()}
    train = test = setup.pairs("hue shift 120", "train")
    searched = {g: 2 for g in CRUCIAL_GROUPS}
    digests = {}
    for arm in ("full_ft", "lora_1x", "lora_4x", "lora_random", "lora_searched"):
        ranks = arm_ranks(setup, arm, 0, "hue shift 120", searched)
        digests[arm] = finetune(setup, base, arm, ranks, train, test, 2, seed=0, concept="hue shift 120")[1]["batch_digest"]
    assert len(set(digests.values())) == 1
    other = finetune(setup, base, "lora_1x", arm_ranks(setup, "lora_1x", 1, "hue shift 120"), train, test, 2, seed=1,
                     concept="hue shift 120")[1]["batch_digest"]
    assert other != digests["lora_1x"]


def test_random_ranks_match_the_searched_size(tmp_path):
    setup = smoke_setup(tmp_path)
    from papers.e2gan.experiments.arms import lora_layers

    layers = {n: i for n, i in lora_layers(setup).items() if i["group"] in CRUCIAL_GROUPS}
    caps = group_caps(layers)
    searched = {"down": 2, "ds": 8, "tb": 2, "us": 4, "up": 2}
    assert rank_params(searched, layers) == count_lora_params(setup, searched)   # ranks cut to each layer's cap
    goal = rank_params(searched, layers)
    draws = set()
    for seed in range(8):
        ranks, ok = matched_random_ranks(layers, searched, 2, [0.5, 1, 2, 4, 8], 0.1, np.random.default_rng(seed))
        assert ok and ranks != searched and abs(rank_params(ranks, layers) - goal) <= 0.1 * goal
        assert all(ranks[g] <= caps[g] for g in ranks)   # never a rank above the group's useful rank
        draws.add(tuple(ranks.values()))
    assert len(draws) >= 5
    ranks, ok = matched_random_ranks(layers, {g: 2 for g in CRUCIAL_GROUPS}, 2, [1], 0.1, np.random.default_rng(0))
    assert not ok  # the only option is the target itself: flagged unmatched


def test_relative_change_per_group():
    G = E2GANGenerator(4, 8, 2)
    before = {k: v.clone() for k, v in G.state_dict().items()}
    with torch.no_grad():
        for m in G.tb.self_attn.modules():
            if isinstance(m, torch.nn.Linear):
                m.weight.mul_(2.0)
    rel = relative_change(before, G)
    assert rel["tb"] > 0 and all(rel[g] == 0 for g in rel if g != "tb")


def test_geomean():
    assert geomean([1, 100]) == pytest.approx(10)
    assert geomean([4, 4, 4]) == pytest.approx(4)


def test_all_layer_ranks_match_the_searched_size_and_reach_the_resnet_blocks(tmp_path):
    """lora_all puts rank >= 1 on every group, the ResNet blocks included, at the searched arm's size."""
    setup = smoke_setup(tmp_path)
    from papers.e2gan.experiments.arms import lora_layers

    searched = {g: 2 for g in CRUCIAL_GROUPS}
    goal = rank_params(searched, lora_layers(setup))
    for seed in range(4):
        ranks, ok = all_layer_ranks(setup, searched, seed, "hue shift 120")
        assert ok and ranks["rb"] >= 1 and set(ranks) == {*CRUCIAL_GROUPS, "rb"}
        assert abs(rank_params(ranks, lora_layers(setup)) - goal) <= 0.1 * goal
        assert arm_ranks(setup, "lora_all", seed, "hue shift 120", searched) == ranks


def test_the_full_fine_tune_trains_to_its_plateau():
    """The full fine-tune's rule is a stopping rule (patience, min_delta, a step cap above the LoRA
    budget); the LoRA arms keep the fixed budget."""
    cfg = load_config(CONFIG, "tiny", [])
    full, lora = arm_budget(cfg, "full_ft"), arm_budget(cfg, "lora_searched")
    assert full["patience"] >= 1 and full["min_delta"] > 0 and full["steps"] > lora["steps"]
    assert full["eval_every"] == lora["eval_every"] and lora["patience"] == 0


def test_a_diffusion_teacher_needs_its_own_concept_pool():
    """The scikit-image teacher brings its ~30 operations; InstructPix2Pix must not be prompted with
    their names, so an empty pool (or family) with it is a config error, and the full profile has its own."""
    from papers.e2gan.experiments import concept_pool
    from papers.e2gan.teacher import CONCEPTS
    from shared.config import ConfigError, load_config

    path = Path(__file__).resolve().parents[2] / "papers" / "e2gan" / "config.yaml"
    assert concept_pool(load_config(path, "smoke")) == list(CONCEPTS)
    full = load_config(path, "full")
    assert concept_pool(full) == list(full.concepts.pool) and not set(full.concepts.pool) & set(CONCEPTS)
    assert not set(full.base.family_prompts) & set(CONCEPTS)
    with pytest.raises(ConfigError, match="concepts.pool"):
        concept_pool(load_config(path, "full", ["concepts.pool=[]"]))


def test_the_concept_pool_from_a_file(tmp_path):
    """`concepts.pool_file` (the rehearsal's concepts.txt, one instruction prompt a line) replaces the
    inline pool; comments and blank lines are skipped; an empty or missing file stops with one message."""
    from papers.e2gan.experiments import concept_pool
    from papers.e2gan.rehearsal_assets import POOL
    from shared.assets import MissingAssetError
    from shared.config import ConfigError, load_config

    path = Path(__file__).resolve().parents[2] / "papers" / "e2gan" / "config.yaml"
    pool = tmp_path / "concepts.txt"
    pool.write_text("# prompts\n\n" + "\n".join(POOL) + "\n")
    assert concept_pool(load_config(path, "full", [f"concepts.pool_file={pool}"])) == list(POOL)
    pool.write_text("# nothing\n")
    with pytest.raises(ConfigError, match="holds no prompts"):
        concept_pool(load_config(path, "full", [f"concepts.pool_file={pool}"]))
    with pytest.raises(MissingAssetError, match="concepts.pool_file"):
        concept_pool(load_config(path, "full", [f"concepts.pool_file={tmp_path / 'nope.txt'}"]))
