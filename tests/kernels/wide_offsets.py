"""Tensors whose element offsets pass 2³¹ while they hold few elements: the kernels' int64-offset tests.

A kernel that multiplies an int32 index by an int32 stride overflows once B·N·d ≥ 2³¹. The product is
what overflows, not which factor is large, so a leading stride just under 2³¹ over three slices makes the
same int32 × int32 product pass 2³¹ at index 2, without 2³¹ elements to compute on under the interpreter.
"""
import torch

STEP = 2**30 + 2**20        # < 2³¹: Triton passes it as an int32 argument; 2·STEP > 2³¹


def past_int32(values: torch.Tensor) -> torch.Tensor:
    """values [3, ...] copied into a view whose leading index steps STEP elements, so values[2] starts at
    element 2·STEP > 2³¹ of one storage. The storage spans ~2³¹ elements of address space (4 GiB at fp16),
    but torch.empty leaves it untouched on CPU: only the pages of the three copied slices get memory."""
    assert values.shape[0] == 3
    inner = values[0].contiguous()
    storage = torch.empty(2 * STEP + inner.numel(), dtype=values.dtype, device=values.device)
    view = storage.as_strided(values.shape, (STEP, *inner.stride()))
    view.copy_(values)
    assert view.stride(0) < 2**31 <= view.stride(0) * 2
    return view
