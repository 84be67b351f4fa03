"""Token selection: scores, stable top-K, counts, disjoint raster-order masks, tube masking, pruning."""
import pytest
import torch

from papers.everest import motion_scores, select_tokens
from papers.everest.data import token_cover
from papers.everest.model import TubeletEmbed
from papers.everest.selection import count, keep_top_mask, random_keep_mask, top_tokens, tube_mask


def crafted_clip(noise: float = 0.0, seed: int = 0):
    """32×32, 16 frames: a square moving right 2 px/frame (rows 0-7) and a static square (rows 24-31)."""
    g = torch.Generator().manual_seed(seed)
    video = torch.full((1, 1, 16, 32, 32), 0.2)
    video[..., 24:32, 4:12] = 0.9                              # static square
    for f in range(16):
        x = 2 * f
        video[0, 0, f, 0:8, x:x + 8] = 1.0                     # moving square
    return video + noise * torch.randn(video.shape, generator=g)


def test_motion_scores_reference_and_first_slice():
    e = torch.randn(2, 5, 7, 3, generator=torch.Generator().manual_seed(1))
    s = motion_scores(e)
    assert s.shape == (2, 5, 7) and s.dtype == torch.float32
    ref = torch.stack([(e[:, t] - e[:, t - 1]).pow(2).sum(-1).sqrt() for t in range(1, 5)], 1)
    torch.testing.assert_close(s[:, 1:], ref)
    torch.testing.assert_close(s[:, 0], s[:, 1])
    assert not motion_scores(e.requires_grad_()).requires_grad


def test_moving_square_scores_top_static_zero():
    torch.manual_seed(0)
    embed = TubeletEmbed(1, 16, patch=8, tubelet=2)
    for noise, tol in [(0.0, 1e-5), (0.01, None)]:
        s = motion_scores(embed(crafted_clip(noise)))[0]          # [8 slices, 16 positions]
        grid = s.reshape(8, 4, 4)
        moving_row, static_rows = grid[:, 0, :], grid[:, 1:, :]
        # in every slice the top-scoring position lies in the moving square's row
        assert (grid.reshape(8, 16).argmax(1) < 4).all()
        assert moving_row.max() > 10 * static_rows.max()
        if tol is not None:
            assert static_rows.abs().max() < tol                   # identical static tokens: zero
        else:
            assert static_rows.max() < 0.2 * moving_row.max()      # up to noise
    # the top-K of the clip contains every token the moving square covers by >= 25%
    moving = torch.zeros(1, 16, 32, 32, dtype=torch.bool)
    for f in range(16):
        moving[0, f, 0:8, 2 * f:2 * f + 8] = True
    square_tokens = set((token_cover(moving, 8, 2)[0] >= 0.25).nonzero().flatten().tolist())
    keep = top_tokens(motion_scores(embed(crafted_clip(0.01))), count(0.3, 128))[0]
    assert len(square_tokens) >= 8 and square_tokens <= set(keep.tolist())


def test_stable_tie_breaking():
    scores = torch.zeros(2, 4, 8)
    keep = top_tokens(scores, 5)
    assert keep.tolist() == [[0, 1, 2, 3, 4]] * 2
    scores[0, 3, 1] = 1.0  # raster index 25 first, then ties in index order
    assert top_tokens(scores, 3)[0].tolist() == [25, 0, 1]
    assert top_tokens(scores, 3, descending=False)[0].tolist() == [0, 1, 2]
    vis, tgt = select_tokens(scores, 0.25, 0.9, torch.Generator().manual_seed(0))
    assert ((vis | tgt)[1].nonzero().flatten() == torch.arange(8)).all()


@pytest.mark.parametrize("t,l,rho,ratio", [(8, 16, 0.3, 0.9), (8, 196, 0.3, 0.9), (5, 9, 0.5, 0.8), (3, 10, 0.4, 0.9)])
def test_counts(t, l, rho, ratio):
    n = t * l
    scores = torch.rand(3, t, l, generator=torch.Generator().manual_seed(t))
    vis, tgt = select_tokens(scores, rho, ratio, torch.Generator().manual_seed(0))
    k, v = int(rho * n + 1e-9), int((1 - ratio) * n + 1e-9)
    assert vis.shape == tgt.shape == (3, n) and vis.dtype == torch.bool
    assert (vis.sum(1) == v).all() and (tgt.sum(1) == k - v).all()
    keep = top_tokens(scores, k)
    union = vis | tgt
    for i in range(3):
        assert set(union[i].nonzero().flatten().tolist()) == set(keep[i].tolist())


def test_paper_counts_and_matched_visible():
    vis, tgt = select_tokens(torch.rand(2, 8, 196), 0.3, 0.9)
    assert vis.sum(1).tolist() == [156, 156] and tgt.sum(1).tolist() == [314, 314]   # K = 470
    vis, tgt = select_tokens(torch.rand(2, 8, 16), 0.3, 0.9, num_visible=16)
    assert vis.sum(1).tolist() == [16, 16] and tgt.sum(1).tolist() == [22, 22]
    assert count(1 - 0.9, 10) == 1 and count(0.3, 10) == 3


def test_masks_disjoint_raster_order_and_per_slice():
    scores = torch.rand(4, 8, 16, generator=torch.Generator().manual_seed(3))
    vis, tgt = select_tokens(scores, 0.3, 0.9, torch.Generator().manual_seed(1))
    assert not (vis & tgt).any()
    x = torch.arange(128).view(1, 128, 1).expand(4, 128, 1)
    for m in (vis, tgt):
        picked = x[m].view(4, -1)
        assert (picked[:, 1:] > picked[:, :-1]).all()          # raster order kept by boolean gathering
    vis, tgt = select_tokens(scores, 0.25, 0.9, per_slice=True)
    assert ((vis | tgt).view(4, 8, 16).sum(-1) == 4).all()


def test_select_tokens_deterministic_and_random_split():
    scores = torch.rand(2, 8, 16, generator=torch.Generator().manual_seed(0))
    a = select_tokens(scores, generator=torch.Generator().manual_seed(5))
    b = select_tokens(scores, generator=torch.Generator().manual_seed(5))
    c = select_tokens(scores, generator=torch.Generator().manual_seed(6))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[0], c[0]) and torch.equal(a[0] | a[1], c[0] | c[1])


def test_tube_mask():
    vis, tgt = tube_mask(3, 8, 16, 0.9, torch.Generator().manual_seed(0))
    assert torch.equal(tgt, ~vis) and (vis.sum(1) == 16).all()
    grid = vis.view(3, 8, 16)
    assert (grid == grid[:, :1]).all()                         # the same spatial mask in every slice


def test_finetune_pruning_masks():
    scores = torch.rand(3, 8, 16, generator=torch.Generator().manual_seed(0))
    keep = keep_top_mask(scores, 0.6)
    assert (keep.sum(1) == 76).all()
    flat = scores.flatten(1)
    assert (flat[keep].view(3, -1).min(1).values >= flat[~keep].view(3, -1).max(1).values).all()
    low = keep_top_mask(scores, 0.6, descending=False)
    assert (flat[low].view(3, -1).max(1).values <= flat[~low].view(3, -1).min(1).values).all()
    assert (random_keep_mask(3, 128, 0.6, torch.Generator().manual_seed(0)).sum(1) == 76).all()
