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


def test_late_fusion_at_lambda_is_a_hand_weighted_sum_of_cosines():
    """A fixed case worked by hand: U and one expert, λa = .75, λt = .25 (weights √((1-λa)(1-λt)) = .375
    on U and √(λa·λt) = .433 on the expert)."""
    s = 2 ** -0.5
    U = {"audio": torch.tensor([[1.0, 0.0]]), "text": torch.tensor([[s, s]]), "image": torch.tensor([[0.0, 1.0]])}
    E = {"audio": torch.tensor([[0.0, 1.0, 0.0]]), "text": torch.tensor([[0.0, 0.6, 0.8]])}
    fused = late_fusion(U, [E], 0.75, 0.25)
    # cos_U(a, t) = .7071, cos_E(a, t) = .6: .25**.5 * .75**.5 * .7071 + .75**.5 * .25**.5 * .6
    want = (0.25 * 0.75) ** 0.5 * s + (0.75 * 0.25) ** 0.5 * 0.6
    assert float(fused["audio"] @ fused["text"].t()) == pytest.approx(want)
    assert want == pytest.approx(0.5659, abs=1e-4)
    # the image part: U's image, weight √(1 - λv) = 1 at λv = 0, zeros where the expert would be
    torch.testing.assert_close(fused["image"], torch.tensor([[0.0, 1.0, 0.0, 0.0, 0.0]]))


@pytest.mark.parametrize("lam_a,lam_t", [(0.5, 0.1), (0.8, 0.5), (0.2, 1.0)])
def test_late_fusion_at_image_weight_zero_ranks_images_as_U(lam_a, lam_t):
    """With λ_image = 0 every audio→image and text→image ranking is U's (for λa, λt < 1 the scores are
    U's times a positive constant), so late fusion's image retrieval equals U's."""
    from papers.freebind.evaluation import recall_at_k

    U = _emb(3, 40, 8, ("audio", "image", "text"))
    E1, E2 = _emb(4, 40, 5, ("audio", "text")), _emb(5, 40, 6, ("audio", "text"))
    fused = late_fusion(U, [E1, E2], lam_a, lam_t)
    for q in ("audio", "text"):
        lam = {"audio": lam_a, "text": lam_t}[q]
        if lam < 1:
            got, ref = fused[q] @ fused["image"].t(), U[q] @ U["image"].t()
            assert torch.equal(got.argsort(dim=1), ref.argsort(dim=1))
            assert recall_at_k(fused[q], fused["image"]) == recall_at_k(U[q], U["image"])
