"""motion_select: semantics on crafted clips and the Triton kernels against the reference."""
import pytest
import torch

from kernels.motion_select import motion_select, motion_select_reference, split_tokens, token_counts
from kernels.motion_select import reference as ref
from kernels.motion_select import triton_kernel as tri
from wide_offsets import past_int32

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"   # compiled on CUDA, the interpreter on CPU


def test_scores_follow_motion_and_first_slice_copies_second():
    B, T, L, D = 1, 4, 9, 8
    emb = torch.zeros(B, T, L, D)
    for t in range(T):
        emb[0, t, t % L] = 5.0  # a token that moves one position per slice
    s = ref.motion_scores(emb).view(B, T, L)
    assert torch.equal(s[:, 0], s[:, 1])
    assert s[0, 2].argmax() in (1, 2) and s[0, 2, 5:].abs().max() == 0


def test_stable_ties_and_counts():
    scores = torch.tensor([[1.0, 3.0, 3.0, 0.0, 3.0, 2.0]])
    noise = torch.tensor([[0.1, 0.2, 0.3, 0.4]])  # identity permutation
    vis, tgt = split_tokens(scores, noise, v=2)
    assert vis.tolist() == [[1, 2]] and tgt.tolist() == [[4, 5]]  # lower index wins ties
    assert token_counts(1568, 0.3, 0.9) == (470, 156)
    with pytest.raises(ValueError):
        token_counts(10, 0.05, 0.9)


@pytest.mark.parametrize("B,T,L,D,P,C", [(2, 4, 9, 24, 8, 3), (1, 3, 50, 70, 12, 3)])
def test_triton_matches_reference(B, T, L, D, P, C):
    g = torch.Generator().manual_seed(0)
    emb = torch.randn(B, T, L, D, generator=g)
    pixels = torch.rand(B, T * L, P, C, generator=g)
    k, v = token_counts(T * L, 0.5, 0.8)
    noise = torch.rand(B, k, generator=g)
    r = motion_select_reference(emb, pixels, noise, mask_ratio=0.8)
    emb, pixels, noise = emb.to(DEVICE), pixels.to(DEVICE), noise.to(DEVICE)
    scores = tri.motion_scores(emb)
    torch.testing.assert_close(scores.cpu(), r[0], rtol=1e-5, atol=1e-6)
    vis, tgt = (t.cpu() for t in split_tokens(scores, noise, v))
    assert torch.equal(vis, r[1]) and torch.equal(tgt, r[2])
    assert set(vis.flatten().tolist()).isdisjoint(set()) and not (set(vis[0].tolist()) & set(tgt[0].tolist()))
    torch.testing.assert_close(tri.normalized_targets(pixels, tgt.to(DEVICE)).cpu(), r[3], rtol=1e-4, atol=1e-4)


def test_dispatcher_runs_the_kernel():
    emb = torch.randn(1, 2, 4, 16, device=DEVICE)
    pixels = torch.rand(1, 8, 4, 3, device=DEVICE)
    out = motion_select(emb, pixels, torch.rand(1, 4, device=DEVICE), mask_ratio=0.75)
    assert out[3].shape == (1, 2, 12)


def test_scores_past_2_31_elements():
    """Clip 2 of the embeddings (fp16) starts past element 2³¹ of its storage (see wide_offsets)."""
    emb = torch.randn(3, 3, 5, 40, generator=torch.Generator().manual_seed(0)).half().to(DEVICE)
    torch.testing.assert_close(tri.motion_scores(past_int32(emb)), ref.motion_scores(emb), rtol=1e-5, atol=1e-6)


def test_targets_of_a_batch_past_2_31_elements():
    """uint8 clips of N tokens × 512 pixels (2×16×16 tubelets) × 3 channels, B·N·P·C > 2³¹ (3 GiB, contiguous);
    only the target tokens are written (torch.empty leaves the rest without memory on CPU) and read."""
    B, P, C = 3, 512, 3
    N = 2**30 // (P * C) + 1
    pixels = torch.empty(B, N, P, C, dtype=torch.uint8, device=DEVICE)
    target = torch.tensor([[0, 7, N - 2, N - 1]] * B, device=DEVICE)
    g = torch.Generator().manual_seed(0)
    for b in range(B):
        pixels[b, target[b]] = torch.randint(0, 256, (4, P, C), generator=g, dtype=torch.uint8).to(DEVICE)
    assert pixels.stride(0) < 2**31 <= (B - 1) * pixels.stride(0)
    torch.testing.assert_close(tri.normalized_targets(pixels, target), ref.normalized_targets(pixels, target),
                               rtol=1e-4, atol=1e-4)
