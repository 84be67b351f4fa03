"""Fused LoRA linear forward in Triton: y = x Wᵀ + b + s·(x Aᵀ) Bᵀ. One pass over x computes x Wᵀ and
x Aᵀ together, then adds s·(x Aᵀ) Bᵀ in the epilogue. The rank is padded to ≥ 16 so every `tl.dot`
compiles on GPUs; offsets are int64 (x or y past 2³¹ elements); x may be a strided view.
Backward (for x, A, B; W and b frozen) uses three matmuls in torch."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..dispatch import next_pow2


@triton.jit
def _lora_fwd_kernel(x_ptr, w_ptr, a_ptr, b_ptr, bias_ptr, y_ptr, M, N, K, R, scale, stride_xm, stride_xk,
                     HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_K: tl.constexpr, BLOCK_R: tl.constexpr):
    rm = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    rr = tl.arange(0, BLOCK_R).to(tl.int64)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    xa = tl.zeros((BLOCK_M, BLOCK_R), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = (k0 + tl.arange(0, BLOCK_K)).to(tl.int64)
        kok = rk < K
        x = tl.load(x_ptr + rm[:, None] * stride_xm + rk[None, :] * stride_xk, mask=(rm < M)[:, None] & kok[None, :],
                    other=0.0)
        w = tl.load(w_ptr + rn[:, None] * K + rk[None, :], mask=(rn < N)[:, None] & kok[None, :], other=0.0)
        a = tl.load(a_ptr + rr[:, None] * K + rk[None, :], mask=(rr < R)[:, None] & kok[None, :], other=0.0)
        acc += tl.dot(x, tl.trans(w), input_precision="ieee")
        xa += tl.dot(x, tl.trans(a), input_precision="ieee")
    bl = tl.load(b_ptr + rn[:, None] * R + rr[None, :], mask=(rn < N)[:, None] & (rr < R)[None, :], other=0.0)
    acc += scale * tl.dot(xa, tl.trans(bl.to(tl.float32)), input_precision="ieee")
    if HAS_BIAS:
        acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm < M)[:, None] & (rn < N)[None, :])


def lora_linear_forward(x2d, weight, bias, lora_a, lora_b, scale, block_m=64, block_n=64, block_k=64):
    M, K = x2d.shape
    N, R = weight.shape[0], lora_a.shape[0]
    y = torch.empty(M, N, dtype=torch.float32, device=x2d.device)
    BM, BN, BK = (min(next_pow2(s), next_pow2(b)) for s, b in ((M, block_m), (N, block_n), (K, block_k)))
    _lora_fwd_kernel[(triton.cdiv(M, BM), triton.cdiv(N, BN))](
        x2d, weight.contiguous(), lora_a.contiguous(), lora_b.contiguous(),
        bias if bias is not None else weight, y, M, N, K, R, float(scale), *x2d.stride(), HAS_BIAS=bias is not None,
        BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, BLOCK_R=next_pow2(R))
    return y.to(x2d.dtype)


class LoRALinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, lora_a, lora_b, scale):
        shape = x.shape
        x2d = x.reshape(-1, shape[-1])
        ctx.save_for_backward(x2d, weight, lora_a, lora_b)
        ctx.scale, ctx.shape = scale, shape
        return lora_linear_forward(x2d, weight, bias, lora_a, lora_b, scale).reshape(*shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx, grad_y):
        """Only the grads autograd asks for (`needs_input_grad`): x, W, b, A, B; None for the rest."""
        x2d, weight, lora_a, lora_b = ctx.saved_tensors
        need_x, need_w, need_bias, need_a, need_b, _ = ctx.needs_input_grad
        gy = grad_y.reshape(-1, weight.shape[0])                        # [M, N]
        gyb = gy @ lora_b if (need_x or need_a) else None               # [M, r]
        grad_x = (gy @ weight + ctx.scale * gyb @ lora_a).reshape(ctx.shape) if need_x else None
        grad_w = gy.T @ x2d if need_w else None                         # [N, K]
        grad_bias = gy.sum(0) if need_bias else None                    # [N]
        grad_a = ctx.scale * gyb.T @ x2d if need_a else None            # [r, K]
        grad_b = ctx.scale * gy.T @ (x2d @ lora_a.T) if need_b else None   # [N, r]
        return grad_x, grad_w, grad_bias, grad_a, grad_b, None
