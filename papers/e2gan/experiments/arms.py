"""The fine-tuning arms: a full fine-tune of the base, or LoRA at an arm's ranks; all arms of one
(concept, seed) share the init seed and minibatch order (common random numbers)."""
from __future__ import annotations

import numpy as np
import torch

from shared.seeding import derive_seed

from ..lora import GROUP_PREFIXES, adapter_state, add_lora, layer_groups, lora_param_count, state_bytes
from ..models import CRUCIAL_GROUPS
from ..ranks import group_costs, matched_random_ranks
from ..train import Pairs, train_gan
from .setup import Setup, full_bytes

# ----------------------------------------------------------------------------- fine-tuning arms
def random_ranks(setup: Setup, searched: dict, seed: int, concept: str) -> tuple[dict, bool]:
    """One random rank draw for (seed, concept), matched to the searched arm's parameter count."""
    lo = setup.cfg.lora
    if not hasattr(setup, "_lora_costs"):
        setup._lora_costs = group_costs(lambda r: count_lora_params(setup, r), CRUCIAL_GROUPS)
    costs = setup._lora_costs
    rng = np.random.default_rng(derive_seed(seed, "random ranks", concept))
    return matched_random_ranks(costs, searched, lo.base_rank, lo.random_mults, lo.random_tolerance, rng)


def arm_ranks(setup: Setup, arm: str, seed: int, concept: str, searched: dict | None = None) -> dict | None:
    cfg = setup.cfg
    r0 = cfg.lora.base_rank
    if arm == "full_ft":
        return None
    if arm == "lora_all":
        return {g: cfg.lora.all_layers_rank for g in (*CRUCIAL_GROUPS, "rb")}
    if arm == "lora_1x":
        return {g: r0 for g in CRUCIAL_GROUPS}
    if arm == "lora_4x":
        return {g: r0 * cfg.lora.uniform_high_mult for g in CRUCIAL_GROUPS}
    if arm == "lora_random":
        return random_ranks(setup, searched, seed, concept)[0]
    if arm == "lora_searched":
        return dict(searched)
    raise ValueError(arm)


def finetune(setup: Setup, base: dict, arm: str, ranks: dict | None, train: Pairs, test: Pairs, steps: int,
             seed: int, eval_every: int = 0, lr: float | None = None, concept: str = ""):
    """Adapt the base to one concept: full fine-tune or LoRA with `ranks` ({group: rank}).

    The init and minibatch seeds depend on (seed, concept) only, never on the arm: every arm of one
    (concept, seed) sees the same minibatches in the same order (common random numbers)."""
    torch.manual_seed(derive_seed(seed, "adapter init", concept))
    G, D = setup.e2gan(), setup.discriminator()
    G.load_state_dict(base["G"])
    D.load_state_dict(base["D"])
    stored = full_bytes(G)
    if arm != "full_ft":
        add_lora(G, ranks, setup.cfg.lora.alpha_per_rank)
        stored = state_bytes(adapter_state(G))
    hist = train_gan(G, D, train, steps, seed=derive_seed(seed, "finetune", concept), test=test,
                     eval_every=eval_every, **setup.train_kwargs(lora=arm != "full_ft", lr=lr))
    hist["stored_bytes"] = stored
    setup.log_fit(f"{arm}/{concept}/s{seed}", hist)
    return G, hist


def count_lora_params(setup: Setup, ranks: dict) -> int:
    return lora_param_count(add_lora(setup.e2gan(), ranks))


def relative_change(before: dict, G, groups=tuple(GROUP_PREFIXES)) -> dict:
    """{group: ‖ΔW‖_F / ‖W‖_F} over the conv/linear weights and biases of each layer group."""
    after = G.state_dict()
    names = layer_groups(G, groups)
    num, den = {g: 0.0 for g in groups}, {g: 0.0 for g in groups}
    for module, g in names.items():
        for leaf in ("weight", "bias"):
            key = f"{module}.{leaf}"
            if key in before:
                num[g] += float((after[key] - before[key]).pow(2).sum())
                den[g] += float(before[key].pow(2).sum())
    return {g: (num[g] / den[g]) ** 0.5 for g in groups if den[g] > 0}


