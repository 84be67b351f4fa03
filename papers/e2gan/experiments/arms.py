"""The fine-tuning arms: a full fine-tune of the base, or LoRA at an arm's ranks; all arms of one
(concept, seed) share the init seed and minibatch order (common random numbers)."""
from __future__ import annotations

import numpy as np
import torch

from shared.seeding import derive_seed

from ..gan_module import count_step_flops
from ..lora import GROUP_PREFIXES, adapter_state, add_lora, layer_groups, layer_ranks, lora_param_count, state_bytes
from ..models import CRUCIAL_GROUPS
from ..ranks import matched_random_ranks
from ..train import Pairs, train_gan
from .setup import Setup, full_bytes


def lora_alpha(cfg) -> float | None:
    """The LoRA α of every arm: fixed (`lora.alpha`; the scale α/r falls as r grows), or None for α = r
    (scale 1, `lora.alpha_is_rank`), under which a higher rank also acts as a larger step."""
    return None if cfg.lora.alpha_is_rank else float(cfg.lora.alpha)


def lora_layers(setup: Setup) -> dict:
    """Every layer LoRA can go on (all groups): {layer: {group, cap, params_per_rank}} (`lora.layer_ranks`)."""
    if not hasattr(setup, "_lora_layers"):
        setup._lora_layers = layer_ranks(setup.e2gan(), {g: 1 for g in GROUP_PREFIXES})
    return setup._lora_layers


def random_ranks(setup: Setup, searched: dict, seed: int, concept: str) -> tuple[dict, bool]:
    """One random rank draw for (seed, concept), matched to the searched arm's parameter count."""
    lo = setup.cfg.lora
    layers = {n: i for n, i in lora_layers(setup).items() if i["group"] in CRUCIAL_GROUPS}
    rng = np.random.default_rng(derive_seed(seed, "random ranks", concept))
    return matched_random_ranks(layers, searched, lo.base_rank, lo.random_mults, lo.random_tolerance, rng)


def per_layer_ranks(setup: Setup, ranks: dict | None) -> list[dict]:
    """Rows {layer, group, rank (after the cap), cap, params}: what group `ranks` put on each layer."""
    if ranks is None:
        return []
    return [{"layer": n, "group": i["group"], "rank": min(int(ranks.get(i["group"], 0)), i["cap"]), "cap": i["cap"],
             "params": min(int(ranks.get(i["group"], 0)), i["cap"]) * i["params_per_rank"]}
            for n, i in lora_layers(setup).items() if ranks.get(i["group"], 0) > 0]


def step_flops(setup: Setup, ranks: dict | None, prompt: str) -> int:
    """Training FLOPs of one step of an arm (None: the full fine-tune) at the configured batch and
    resolution, counted as `train_gan` counts them, without training."""
    cfg = setup.cfg
    G, D = setup.e2gan(), setup.discriminator()
    if ranks is not None:
        add_lora(G, ranks, lora_alpha(cfg))
    b, res = cfg.train.batch_size, cfg.data.resolution
    tokens, mask = setup.encoder.encode([prompt] * b)
    x = torch.zeros(b, 3, res, res, device=setup.device)
    return count_step_flops(G, D, (x, x, tokens.to(setup.device), mask.to(setup.device)), cfg.train.lambda_l1)


def all_layer_ranks(setup: Setup, searched: dict, seed: int, concept: str) -> tuple[dict, bool]:
    """LoRA on every group, the crucial ones and the ResNet blocks (rank >= 1 on each), at the searched
    arm's parameter count: one draw for (seed, concept) among the assignments within
    `lora.random_tolerance` of it, as the random arm draws among the crucial groups only. The two arms
    differ in where the parameters go, not in how many there are."""
    lo = setup.cfg.lora
    rng = np.random.default_rng(derive_seed(seed, "all-layer ranks", concept))
    target = {**{g: int(searched[g]) for g in CRUCIAL_GROUPS}, "rb": 0}   # rb 0 counts nothing; every draw has rb >= 1
    return matched_random_ranks(lora_layers(setup), target, lo.base_rank, lo.random_mults, lo.random_tolerance, rng)


def arm_budget(cfg, arm: str) -> dict:
    """An arm's training rule (`finetune`'s keywords): LoRA arms `finetune.steps`, evaluated every
    `finetune.eval_every`; the full fine-tune to its own plateau: evaluated as often, stopped after
    `finetune.full_ft.patience` evaluations in a row without a `min_delta` dB gain, at most
    `finetune.full_ft.max_steps` steps."""
    ft = cfg.finetune
    if arm == "full_ft":
        return {"steps": int(ft.full_ft.max_steps), "eval_every": int(ft.eval_every),
                "patience": int(ft.full_ft.patience), "min_delta": float(ft.full_ft.min_delta)}
    return {"steps": int(ft.steps), "eval_every": int(ft.eval_every), "patience": 0, "min_delta": 0.0}


def arm_ranks(setup: Setup, arm: str, seed: int, concept: str, searched: dict | None = None) -> dict | None:
    cfg = setup.cfg
    r0 = cfg.lora.base_rank
    if arm == "full_ft":
        return None
    if arm == "lora_all":
        return all_layer_ranks(setup, searched, seed, concept)[0]
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
             seed: int, eval_every: int = 0, lr: float | None = None, concept: str = "", patience: int = 0,
             min_delta: float = 0.0):
    """Adapt the base to one concept: full fine-tune or LoRA with `ranks` ({group: rank}).

    The init and minibatch seeds depend on (seed, concept) only, never on the arm: every arm of one
    (concept, seed) sees the same minibatches in the same order (common random numbers)."""
    torch.manual_seed(derive_seed(seed, "adapter init", concept))
    G, D = setup.e2gan(), setup.discriminator()
    G.load_state_dict(base["G"])
    D.load_state_dict(base["D"])
    stored = full_bytes(G)
    if arm != "full_ft":
        add_lora(G, ranks, lora_alpha(setup.cfg))
        stored = state_bytes(adapter_state(G))
    hist = train_gan(G, D, train, steps, seed=derive_seed(seed, "finetune", concept), test=test,
                     eval_every=eval_every, patience=patience, min_delta=min_delta,
                     **setup.train_kwargs(lora=arm != "full_ft", lr=lr))
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


