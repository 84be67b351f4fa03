"""Late fusion without training: the scores it gives are the weighted sums of the spaces' cosines."""
import pytest
import torch
import torch.nn.functional as F

from papers.freebind.fusion import late_fusion


def _emb(seed, n, d, mods):
    g = torch.Generator().manual_seed(seed)
    return {m: F.normalize(torch.randn(n, d, generator=g), dim=-1) for m in mods}


def test_late_fusion_scores_are_weighted_cosines():
    U = _emb(0, 6, 5, ("audio", "image", "text"))
    E1, E2 = _emb(1, 6, 4, ("audio", "text")), _emb(2, 6, 3, ("audio", "text"))
    lam = 0.3
    fused = late_fusion(U, [E1, E2], lam, lam)
    got = fused["audio"] @ fused["text"].t()
    cos = {k: s["audio"] @ s["text"].t() for k, s in (("U", U), ("E1", E1), ("E2", E2))}
    torch.testing.assert_close(got, (1 - lam) * cos["U"] + lam * (cos["E1"] + cos["E2"]) / 2)
    # unit norm, and images (no expert holds them) keep U's ranking against fused audio
    assert fused["audio"].norm(dim=1) == pytest.approx([1.0] * 6)
    torch.testing.assert_close(fused["audio"] @ fused["image"].t(), (1 - lam) ** 0.5 * (U["audio"] @ U["image"].t()))
    # different λ per modality: weights √((1-λa)(1-λt)) on U, √(λa·λt)/K on the experts
    la, lt = 0.8, 0.5
    f2 = late_fusion(U, [E1, E2], la, lt)
    want = ((1 - la) * (1 - lt)) ** 0.5 * cos["U"] + (la * lt) ** 0.5 * (cos["E1"] + cos["E2"]) / 2
    torch.testing.assert_close(f2["audio"] @ f2["text"].t(), want)


def test_experts_average_has_no_unified_part():
    E1, E2 = _emb(1, 6, 4, ("audio", "text")), _emb(2, 6, 3, ("audio", "text"))
    fused = late_fusion({}, [E1, E2], 1.0, 1.0)
    assert set(fused) == {"audio", "text"} and fused["audio"].shape == (6, 7)
    torch.testing.assert_close(fused["audio"] @ fused["text"].t(),
                               (E1["audio"] @ E1["text"].t() + E2["audio"] @ E2["text"].t()) / 2)
