"""LoRA linear, pure torch: y = x Wᵀ + b + s · (x Aᵀ) Bᵀ, with W [N,K] (frozen), A [r,K], B [N,r]."""
from __future__ import annotations

import torch


def lora_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, lora_a: torch.Tensor,
                lora_b: torch.Tensor, scale: float) -> torch.Tensor:
    y = x @ weight.T + scale * (x @ lora_a.T) @ lora_b.T
    return y if bias is None else y + bias
