"""Arm metrics are samples over training seeds, in seed order, paired across arms by seed."""
import math

import pandas as pd
import pytest

from papers.e2gan.experiments.setup import difference, ratio, seed_samples
from shared.claims import gather


def runs():
    # two concepts x two seeds (listed out of order) x two arms
    rows = []
    for seed, shift in ((7, 1.0), (2, 0.0)):
        for concept, base in (("a", 10.0), ("b", 14.0)):
            rows.append({"concept": concept, "seed": seed, "arm": "lora_searched", "psnr": base + shift + 0.5})
            rows.append({"concept": concept, "seed": seed, "arm": "lora_1x", "psnr": base + shift})
    return pd.DataFrame(rows)


def test_seed_samples_are_per_seed_means_over_concepts_in_seed_order():
    arms = seed_samples(runs(), "arm", [2, 7], ("psnr",))
    s = arms["lora_searched"]["psnr"]
    assert s["unit"] == "seed" and s["n"] == 2
    assert s["values"] == [12.5, 13.5]  # seed 2 first, as listed, not as the rows came
    assert arms["lora_1x"]["psnr"]["values"] == [12.0, 13.0]
    assert s["mean"] == pytest.approx(13.0) and s["std"] == pytest.approx(math.sqrt(0.5))


def test_differences_and_ratios_pair_by_seed():
    arms = seed_samples(runs(), "arm", [2, 7], ("psnr",))
    gap = difference(arms["lora_searched"]["psnr"], arms["lora_1x"]["psnr"])
    assert gap["values"] == pytest.approx([0.5, 0.5]) and gap["unit"] == "seed"
    assert ratio(arms["lora_searched"]["psnr"], arms["lora_1x"]["psnr"])["values"] == pytest.approx([12.5 / 12, 13.5 / 13])
    # the ledger's paired evidence for searched > 1x is the same seed-wise gap
    ev = gather("s", arms["lora_searched"]["psnr"], "r", arms["lora_1x"]["psnr"])
    assert ev.kind == "paired" and ev.n == 2 and ev.values == pytest.approx(gap["values"])


def test_seed_samples_need_every_seed():
    with pytest.raises(KeyError):
        seed_samples(runs(), "arm", [2, 7, 9], ("psnr",))


def test_seed_samples_grouped_by_base():
    """One base per seed: every sample names the base it rests on, and a gap keeps the grouping."""
    arms = seed_samples(runs(), "arm", [2, 7], ("psnr",), bases=["base0", "base1"])
    s, r = arms["lora_searched"]["psnr"], arms["lora_1x"]["psnr"]
    assert s["groups"] == ["base0", "base1"] and s["group_unit"] == "base"
    gap = difference(s, r)
    assert gap["groups"] == ["base0", "base1"] and gap["values"] == pytest.approx([0.5, 0.5])
