"""LoRA on the crucial layers: W′ = W + (α/r)·B·A, with B = 0 at init (the adapter starts as identity).

- Conv2d and Linear (Down, DS, the TB's attention and FFN projections, Up's 7×7 head): peft's LoRA,
  injected with `peft.inject_adapter_in_model`. A conv layer becomes conv(C_in→r, same k×k, stride,
  padding) then 1×1 conv(r→C_out).
- ConvTranspose2d (US and Up's two transposed convs): hand-written here, because peft refuses
  `nn.ConvTranspose2d`. A is a transposed conv(C_in→r) with the base's kernel, stride, padding and
  output padding; B a 1×1 conv(r→C_out). Merged: W′[i, o] = W[i, o] + (α/r) Σ_r A[i, r] B[o, r].

Ranks are given per layer group (`down`, `ds`, `tb`, `us`, `up`, and `rb` for "LoRA on all
layers"). α = r by default (scale 1). What is stored per concept is the adapter only, in fp16.
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


def add_lora(model: nn.Module, ranks: dict[str, int], alpha_per_rank: float = 1.0) -> nn.Module:
    """Put LoRA on every layer of each group in `ranks` ({group: rank}); freeze everything else."""
    from peft import LoraConfig, inject_adapter_in_model

    targets = layer_groups(model, [g for g, r in ranks.items() if r > 0])
    peft_names = [n for n in targets if not isinstance(model.get_submodule(n), nn.ConvTranspose2d)]
    if peft_names:
        rank_of = {n: ranks[targets[n]] for n in peft_names}
        cfg = LoraConfig(r=1, lora_alpha=1, target_modules=peft_names, lora_dropout=0.0,
                         rank_pattern={n.replace(".", r"\."): r for n, r in rank_of.items()},
                         alpha_pattern={n.replace(".", r"\."): alpha_per_rank * r for n, r in rank_of.items()})
        inject_adapter_in_model(cfg, model)
    for name, g in targets.items():
        module = model.get_submodule(name)
        if isinstance(module, nn.ConvTranspose2d):
            _set_module(model, name, LoRAConvTranspose2d(module, ranks[g], alpha_per_rank * ranks[g]))
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
