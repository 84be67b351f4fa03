"""LoRA on the crucial layers: W′ = W + (α/r)·B·A, with B = 0 at init (the adapter starts as identity).

- Conv2d and Linear (Down, DS, the TB's attention and FFN projections, Up's 7×7 head): peft's LoRA,
  injected with `peft.inject_adapter_in_model`. A conv layer becomes conv(C_in→r, same k×k, stride,
  padding) then 1×1 conv(r→C_out).
- ConvTranspose2d (US and Up's two transposed convs): hand-written here, because peft refuses
  `nn.ConvTranspose2d`. A is a transposed conv(C_in→r) with the base's kernel, stride, padding and
  output padding; B a 1×1 conv(r→C_out). Merged: W′[i, o] = W[i, o] + (α/r) Σ_r A[i, r] B[o, r].

Ranks are given per layer group (`down`, `ds`, `tb`, `us`, `up`, and `rb` for "LoRA on all
layers"). Each layer takes min(its group's rank, its useful rank): ΔW = B·A, seen as a matrix
C_out × (C_in·k²) (a transposed conv: (C_in·k²) × C_out), has rank ≤ min(C_out, C_in·k²), so a larger
rank only adds parameters and FLOPs (`useful_rank`). α is fixed (the scale α/r falls as r grows, so a
higher rank is not a larger step), or α = r (scale 1) with `alpha=None`. What is stored per concept is
the adapter only, in fp16.
"""
from __future__ import annotations

import math

import torch
from torch import nn

GROUP_PREFIXES = {"down": ("down.",), "ds": ("ds",), "tb": ("tb.",), "us": ("us",), "up": ("up.",),
                  "rb": ("rb1.", "rb2.", "rb3.", "blocks.")}


def layer_groups(model: nn.Module, groups) -> dict[str, str]:
    """{module name: group} for every Conv2d / ConvTranspose2d / Linear in the given groups."""
    out = {}
    for name, module in model.named_modules():
        if not isinstance(module, (nn.Conv2d, nn.ConvTranspose2d, nn.Linear)):
            continue
        for g in groups:
            if any(name == p or name.startswith(p) for p in GROUP_PREFIXES[g] if p.endswith(".")) or name in GROUP_PREFIXES[g]:
                out[name] = g
    return out


def useful_rank(module: nn.Module) -> int:
    """The largest rank a LoRA update of this layer can have: min(C_out, C_in·k²) for a conv or a
    transposed conv (A carries the k×k kernel, B is 1×1), min(in, out) for a linear layer."""
    if isinstance(module, nn.Linear):
        return min(module.in_features, module.out_features)
    k = module.kernel_size[0] * module.kernel_size[1]
    return min(module.out_channels, module.in_channels // module.groups * k)


def layer_ranks(model: nn.Module, ranks: dict[str, int]) -> dict[str, dict]:
    """{layer: {group, rank, cap, params_per_rank}} for every layer the group ranks put LoRA on; `rank` is
    min(group rank, cap). params_per_rank: A's and B's weights at rank 1 (C_in·k² + C_out, or in + out)."""
    out = {}
    for name, g in layer_groups(model, [g for g, r in ranks.items() if r > 0]).items():
        m = model.get_submodule(name)
        cap = useful_rank(m)
        per = (m.in_features + m.out_features if isinstance(m, nn.Linear)
               else m.in_channels // m.groups * m.kernel_size[0] * m.kernel_size[1] + m.out_channels)
        out[name] = {"group": g, "rank": min(int(ranks[g]), cap), "cap": cap, "params_per_rank": per}
    return out


class LoRAConvTranspose2d(nn.Module):
    """Hand-written LoRA for nn.ConvTranspose2d (peft does not support it)."""

    def __init__(self, base: nn.ConvTranspose2d, r: int, alpha: float):
        super().__init__()
        self.base_layer = base
        self.r, self.scaling = r, alpha / r
        self.lora_A = nn.ConvTranspose2d(base.in_channels, r, base.kernel_size, base.stride, base.padding,
                                         base.output_padding, bias=False, dilation=base.dilation)
        self.lora_B = nn.Conv2d(r, base.out_channels, 1, bias=False)
        nn.init.kaiming_uniform_(self.lora_A.weight, a=math.sqrt(5))
        nn.init.zeros_(self.lora_B.weight)

    def forward(self, x):
        return self.base_layer(x) + self.lora_B(self.lora_A(x)) * self.scaling

    def merged(self) -> nn.ConvTranspose2d:
        """The base layer with ΔW folded in (A: (C_in, r, k, k), B: (C_out, r, 1, 1))."""
        delta = torch.einsum("irkl,or->iokl", self.lora_A.weight, self.lora_B.weight[:, :, 0, 0])
        base = self.base_layer
        with torch.no_grad():
            base.weight += self.scaling * delta
        return base


def _set_module(model: nn.Module, name: str, module: nn.Module) -> None:
    parent, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, child, module)


def add_lora(model: nn.Module, ranks: dict[str, int], alpha: float | None = None) -> nn.Module:
    """Put LoRA on every layer of each group in `ranks` ({group: rank}), each layer at min(rank, its
    useful rank); freeze everything else. alpha: a fixed α (scale α/r); None: α = r (scale 1)."""
    from peft import LoraConfig, inject_adapter_in_model

    layers = layer_ranks(model, ranks)
    rank_of = {n: info["rank"] for n, info in layers.items()}
    alpha_of = {n: float(r if alpha is None else alpha) for n, r in rank_of.items()}
    peft_names = [n for n in layers if not isinstance(model.get_submodule(n), nn.ConvTranspose2d)]
    if peft_names:
        cfg = LoraConfig(r=1, lora_alpha=1, target_modules=peft_names, lora_dropout=0.0,
                         rank_pattern={n.replace(".", r"\."): rank_of[n] for n in peft_names},
                         alpha_pattern={n.replace(".", r"\."): alpha_of[n] for n in peft_names})
        inject_adapter_in_model(cfg, model)
    for name in layers:
        module = model.get_submodule(name)
        if isinstance(module, nn.ConvTranspose2d):
            _set_module(model, name, LoRAConvTranspose2d(module, rank_of[name], alpha_of[name]))
    for name, p in model.named_parameters():
        p.requires_grad_("lora_" in name)
    return model


def merge_lora(model: nn.Module) -> nn.Module:
    """Fold every adapter into its base weights and restore plain layers (in place)."""
    from peft.tuners.lora import LoraLayer

    names = [n for n, m in model.named_modules() if isinstance(m, (LoraLayer, LoRAConvTranspose2d))]
    for name in names:
        module = model.get_submodule(name)
        if isinstance(module, LoRAConvTranspose2d):
            _set_module(model, name, module.merged())
        else:
            module.merge()
            _set_module(model, name, module.get_base_layer())
    return model


def adapter_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The adapter weights only, in fp16: what is stored per concept."""
    return {n: p.detach().to(torch.float16).clone() for n, p in model.named_parameters() if "lora_" in n}


def load_adapter(model: nn.Module, state: dict[str, torch.Tensor]) -> None:
    params = dict(model.named_parameters())
    with torch.no_grad():
        for n, t in state.items():
            params[n].copy_(t.float())


def state_bytes(state: dict[str, torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in state.values())


def lora_param_count(model: nn.Module) -> int:
    return sum(p.numel() for n, p in model.named_parameters() if "lora_" in n)
