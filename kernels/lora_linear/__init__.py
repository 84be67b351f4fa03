"""Fused LoRA linear: y = x Wᵀ + b + s·(x Aᵀ) Bᵀ, with the gradients autograd asks for (x, W, b, A, B).

No paper calls it: E2GAN's LoRA on Linear layers is peft's (the library), and a fused forward would
change its tiny numbers' rounding; its GPU speed claim and benchmark rows were dropped (kernels/README.md)."""
from __future__ import annotations

import torch

from ..dispatch import backend
from .reference import lora_linear as lora_linear_reference


def lora_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, lora_a: torch.Tensor,
                lora_b: torch.Tensor, scale: float) -> torch.Tensor:
    """Triton on CUDA (fp32/bf16 inputs, fp32 accumulation), reference elsewhere."""
    if backend(x, weight, lora_a, lora_b) == "reference":
        return lora_linear_reference(x, weight, bias, lora_a, lora_b, scale)
    from .triton_kernel import LoRALinearFn

    return LoRALinearFn.apply(x, weight, bias, lora_a, lora_b, scale)


__all__ = ["lora_linear", "lora_linear_reference"]
