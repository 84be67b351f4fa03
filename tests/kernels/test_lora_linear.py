"""lora_linear: the fused forward and its backward against the unfused torch form."""
import pytest
import torch

from kernels.lora_linear import lora_linear, lora_linear_reference
from kernels.lora_linear.triton_kernel import LoRALinearFn


@pytest.mark.parametrize("shape,K,N,r", [((5, 7), 33, 19, 4), ((64,), 64, 48, 16), ((3, 10), 20, 70, 8)])
def test_forward_and_backward_match_reference(shape, K, N, r):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(*shape, K, generator=g, requires_grad=True)
    w, bias = torch.randn(N, K, generator=g), torch.randn(N, generator=g)
    a = torch.randn(r, K, generator=g, requires_grad=True)
    b = torch.randn(N, r, generator=g, requires_grad=True)
    y = LoRALinearFn.apply(x, w, bias, a, b, 0.5)
    y_ref = lora_linear_reference(x, w, bias, a, b, 0.5)
    torch.testing.assert_close(y, y_ref, rtol=1e-4, atol=1e-4)
    gy = torch.randn_like(y)
    grads = torch.autograd.grad(y, (x, a, b), gy)
    grads_ref = torch.autograd.grad(y_ref, (x, a, b), gy)
    for u, v in zip(grads, grads_ref):
        torch.testing.assert_close(u, v, rtol=1e-4, atol=1e-4)


def test_dispatcher_without_bias():
    x, w = torch.randn(4, 16), torch.randn(8, 16)
    a, b = torch.randn(2, 16), torch.zeros(8, 2)
    torch.testing.assert_close(lora_linear(x, w, None, a, b, 2.0), x @ w.T, rtol=1e-5, atol=1e-5)


def test_force_reference(monkeypatch):
    from kernels.dispatch import backend

    monkeypatch.setenv("KERNELS_FORCE_REFERENCE", "1")
    assert backend(torch.zeros(1)) == "reference"
    monkeypatch.delenv("KERNELS_FORCE_REFERENCE")
    assert backend(torch.zeros(1)) == "interpreter"
