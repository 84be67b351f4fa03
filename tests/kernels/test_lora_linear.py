"""lora_linear: the fused forward and its backward against the unfused torch form. The Triton calls run
compiled on CUDA when present (kernels/gpu_check.sh), under the interpreter on CPU otherwise."""
import pytest
import torch

from kernels.lora_linear import lora_linear, lora_linear_reference
from kernels.lora_linear.triton_kernel import LoRALinearFn
from wide_offsets import past_int32

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"   # the compiled kernel takes CUDA tensors
needs_cuda = pytest.mark.skipif(DEVICE != "cuda", reason="needs CUDA (compiled Triton)")


@pytest.mark.parametrize("shape,K,N,r", [((5, 7), 33, 19, 4), ((64,), 64, 48, 16), ((3, 10), 20, 70, 8)])
def test_forward_and_backward_match_reference(shape, K, N, r):
    g = torch.Generator().manual_seed(0)
    x, w, bias = torch.randn(*shape, K, generator=g), torch.randn(N, K, generator=g), torch.randn(N, generator=g)
    a, b = torch.randn(r, K, generator=g), torch.randn(N, r, generator=g)
    x, w, bias, a, b = (t.to(DEVICE).requires_grad_(True) for t in (x, w, bias, a, b))
    y = LoRALinearFn.apply(x, w, bias, a, b, 0.5)
    y_ref = lora_linear_reference(x, w, bias, a, b, 0.5)
    torch.testing.assert_close(y, y_ref, rtol=1e-4, atol=1e-4)
    gy = torch.randn_like(y)
    grads = torch.autograd.grad(y, (x, w, bias, a, b), gy)
    grads_ref = torch.autograd.grad(y_ref, (x, w, bias, a, b), gy)
    for u, v in zip(grads, grads_ref):
        torch.testing.assert_close(u, v, rtol=1e-4, atol=1e-4)


def test_backward_computes_only_the_grads_asked_for():
    """needs_input_grad: frozen W and b (an adapter) and an x without grad get None (no matmul for them)."""
    g = torch.Generator().manual_seed(0)
    x, w, bias = torch.randn(6, 12, generator=g), torch.randn(10, 12, generator=g), torch.randn(10, generator=g)
    a = torch.randn(3, 12, generator=g).requires_grad_(True)
    b = torch.randn(10, 3, generator=g).requires_grad_(True)
    x, w, bias = (t.to(DEVICE) for t in (x, w, bias))
    a, b = (t.to(DEVICE).detach().requires_grad_(True) for t in (a, b))
    y = LoRALinearFn.apply(x, w, bias, a, b, 0.5)
    y.sum().backward()
    assert a.grad is not None and b.grad is not None and w.grad is None and bias.grad is None and x.grad is None
    ref_a, ref_b = (t.detach().clone().requires_grad_(True) for t in (a, b))
    lora_linear_reference(x, w, bias, ref_a, ref_b, 0.5).sum().backward()
    torch.testing.assert_close(a.grad, ref_a.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(b.grad, ref_b.grad, rtol=1e-4, atol=1e-4)


def test_dispatcher_without_bias():
    x, w = torch.randn(4, 16), torch.randn(8, 16)
    a, b = torch.randn(2, 16), torch.zeros(8, 2)
    torch.testing.assert_close(lora_linear(x, w, None, a, b, 2.0), x @ w.T, rtol=1e-5, atol=1e-5)


def test_force_reference(monkeypatch):
    from kernels.dispatch import backend

    monkeypatch.setenv("KERNELS_FORCE_REFERENCE", "1")
    assert backend(torch.zeros(1, device=DEVICE)) == "reference"
    monkeypatch.delenv("KERNELS_FORCE_REFERENCE")
    assert backend(torch.zeros(1, device=DEVICE)) == ("triton" if DEVICE == "cuda" else "interpreter")


def test_x_rows_past_2_31_elements():
    """Row 2 of x (fp16) starts past element 2³¹ of its storage (see wide_offsets)."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    g = torch.Generator().manual_seed(1)
    x, w, bias = torch.randn(3, 32, generator=g), torch.randn(24, 32, generator=g), torch.randn(24, generator=g)
    a, b = torch.randn(4, 32, generator=g), torch.randn(24, 4, generator=g)
    half = [t.half().to(device) for t in (x, w, bias, a, b)]
    y = lora_linear(past_int32(half[0]), *half[1:], 0.5)
    y_ref = lora_linear_reference(*[t.float() for t in half], 0.5)
    assert y.dtype == torch.float16
    torch.testing.assert_close(y.float(), y_ref, rtol=2e-3, atol=2e-3)   # fp16 output: 2⁻¹¹ rounding


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: y of 2³¹ fp32 elements (8 GiB) to write")
def test_cuda_output_past_2_31_elements():
    M, K, N, r = 2**25 + 5, 16, 64, 4                 # M·N > 2³¹
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(M, K, device="cuda", generator=g)
    w, a, b = (torch.randn(*s, device="cuda", generator=g) for s in ((N, K), (r, K), (N, r)))
    y = lora_linear(x, w, None, a, b, 0.5)
    torch.testing.assert_close(y[-7:], lora_linear_reference(x[-7:], w, None, a, b, 0.5), rtol=1e-4, atol=1e-4)


@needs_cuda
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-4), (torch.bfloat16, 3e-2)])
def test_cuda_dtypes_forward_and_backward(dtype, tol):
    """The docstring's promise on a GPU: fp32 and bf16 inputs, fp32 accumulation, output in the input's
    dtype; forward and the grads of x, A and B against the fp32 reference on the same (rounded) inputs."""
    g = torch.Generator(device="cuda").manual_seed(0)
    M, K, N, r = 300, 96, 80, 8
    x, w, bias, a, b = (torch.randn(*s, device="cuda", generator=g).to(dtype)
                        for s in ((M, K), (N, K), (N,), (r, K), (N, r)))
    x, a, b = (t.requires_grad_(True) for t in (x, a, b))
    y = lora_linear(x, w, bias, a, b, 0.5)
    assert y.dtype == dtype
    f32 = [t.detach().float().requires_grad_(t.requires_grad) for t in (x, w, bias, a, b)]
    y_ref = lora_linear_reference(*f32, 0.5)
    torch.testing.assert_close(y.float(), y_ref, rtol=tol, atol=tol * y_ref.abs().max().item())
    gy = torch.randn(M, N, device="cuda", generator=g)
    grads = torch.autograd.grad(y, (x, a, b), gy.to(dtype))
    grads_ref = torch.autograd.grad(y_ref, (f32[0], f32[3], f32[4]), gy)
    for u, v in zip(grads, grads_ref):
        assert u.dtype == dtype
        torch.testing.assert_close(u.float(), v, rtol=tol, atol=tol * v.abs().max().item())
