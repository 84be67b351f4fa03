"""Fused LoRA linear (E2GAN, any adapter): y = x Wᵀ + b + s·(x Aᵀ) Bᵀ, gradients for x, A and B."""
from __future__ import annotations

import torch

from ..dispatch import backend
from .reference import lora_linear as lora_linear_reference


def lora_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, lora_a: torch.Tensor,
                lora_b: torch.Tensor, scale: float) -> torch.Tensor:
    """Triton on CUDA (fp32/bf16 inputs, fp32 accumulation), reference elsewhere. W and b are frozen."""
    if backend(x, weight, lora_a, lora_b) == "reference":
        return lora_linear_reference(x, weight, bias, lora_a, lora_b, scale)
    from .triton_kernel import LoRALinearFn

    return LoRALinearFn.apply(x, weight, bias, lora_a, lora_b, scale)


__all__ = ["lora_linear", "lora_linear_reference"]
