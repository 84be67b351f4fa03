"""FreeBind's projector, MoP, mixing, bonds, pseudo tuples and bond training."""
import torch
import torch.nn.functional as F

from papers.freebind import MoP, Projector, ProjectorBank, combination_bond, displacement_bond, mix, pseudo_tuples
from papers.freebind.bonds import (BondTrainConfig, batched_info_nce, bond_datasets, bond_loss, project_experts,
                                   retrieval_weights, shuffle_targets, train_bond)
from papers.freebind.spaces import info_nce


def unit(n, d, seed=0):
    return F.normalize(torch.randn(n, d, generator=torch.Generator().manual_seed(seed)), dim=-1)


def test_projector_unit_norm_and_eval_deterministic():
    torch.manual_seed(0)
    p = Projector(12, 7, hidden=32)
    x = torch.randn(40, 12)
    p.train()
    p(x)  # update BN running stats
    assert torch.allclose(p(x).norm(dim=-1), torch.ones(40), atol=1e-5)
    p.eval()
    a, b = p(x), p(x)
    assert torch.equal(a, b)
    # in eval mode a row's output does not depend on the rest of the batch
    assert torch.allclose(p(x[:5]), a[:5], atol=1e-6)
    assert torch.allclose(a.norm(dim=-1), torch.ones(40), atol=1e-5)
    # architecture: Linear -> BN -> ReLU -> Linear -> BN, Xavier-uniform weights
    kinds = [type(m).__name__ for m in p.net]
    assert kinds == ["Linear", "BatchNorm1d", "ReLU", "Linear", "BatchNorm1d"]
    bound = (6 / (12 + 32)) ** 0.5
    assert Projector(12, 7, hidden=32).net[0].weight.abs().max() <= bound


def test_mix_endpoints():
    x, y = torch.randn(5, 8), torch.randn(5, 8)
    assert torch.allclose(mix(x, y, 0.0), F.normalize(x, dim=-1))
    assert torch.allclose(mix(x, y, 1.0), F.normalize(y, dim=-1))
    assert torch.allclose(mix(x, y, 0.3), F.normalize(0.7 * x + 0.3 * y, dim=-1))


def test_mop_is_normalised_mean():
    torch.manual_seed(1)
    ps = [Projector(6, 4, hidden=16).eval() for _ in range(7)]
    x = torch.randn(9, 6)
    ref = F.normalize(torch.stack([p(x) for p in ps]).mean(0), dim=-1)
    assert torch.allclose(MoP(ps)(x), ref, atol=1e-6)


def test_bank_members_equal_projectors():
    torch.manual_seed(2)
    bank = ProjectorBank(3, 6, 4, hidden=16)
    x = torch.randn(3, 20, 6)
    bank.train()
    out = bank(x)  # train mode: per-member batch statistics
    for k in range(3):
        m = bank.member(k).train()
        assert torch.allclose(m(x[k]), out[k], atol=1e-5)
    bank.eval()
    out = bank(x)
    for k in range(3):
        assert torch.allclose(bank.member(k)(x[k]), out[k], atol=1e-5)


def test_batched_info_nce_matches_per_member():
    a, b = unit(24, 5, 1).reshape(3, 8, 5), unit(24, 5, 2).reshape(3, 8, 5)
    ref = torch.stack([info_nce(a[k], b[k], 0.05) for k in range(3)])
    assert torch.allclose(batched_info_nce(a, b, 0.05), ref, atol=1e-5)


def test_combination_leaves_images_untouched():
    torch.manual_seed(3)
    U = {"audio": unit(10, 8, 1), "image": unit(10, 8, 2), "text": unit(12, 8, 3)}
    E = {"audio": unit(10, 5, 4), "text": unit(12, 5, 5)}
    P = Projector(5, 8, hidden=16).eval()
    out = combination_bond(U, [(E, P)], lam_a=0.8, lam_t=0.5)
    assert torch.equal(out["image"], U["image"])
    with torch.no_grad():
        assert torch.allclose(out["audio"], mix(U["audio"], P(E["audio"]), 0.8), atol=1e-6)
        assert torch.allclose(out["text"], mix(U["text"], P(E["text"]), 0.5), atol=1e-6)
        # parallel: the experts' projections are averaged uniformly, then normalised, before mixing
        P2 = Projector(5, 8, hidden=16).eval()
        E2 = {"audio": unit(10, 5, 6), "text": unit(12, 5, 7)}
        par = combination_bond(U, [(E, P), (E2, P2)], 0.5, 0.1)
        hat = F.normalize((P(E["audio"]) + P2(E2["audio"])) / 2, dim=-1)
        assert torch.allclose(par["audio"], mix(U["audio"], hat, 0.5), atol=1e-6)
        hat_t = F.normalize((P(E["text"]) + P2(E2["text"])) / 2, dim=-1)
        assert torch.allclose(par["text"], mix(U["text"], hat_t, 0.1), atol=1e-6)
    # λ = 0 gives back U
    zero = combination_bond(U, [(E, P)], 0.0, 0.0)
    assert torch.allclose(zero["audio"], U["audio"], atol=1e-6) and torch.allclose(zero["text"], U["text"], atol=1e-6)


def test_parallel_mean_flat_is_the_official_14_way_mean():
    torch.manual_seed(5)
    U = {"audio": unit(10, 8, 1), "text": unit(10, 8, 2)}
    Eg, Em = {"audio": unit(10, 5, 3), "text": unit(10, 5, 4)}, {"audio": unit(10, 5, 5), "text": unit(10, 5, 6)}
    G = MoP([Projector(5, 8, hidden=16).eval() for _ in range(7)])
    M = MoP([Projector(5, 8, hidden=16).eval() for _ in range(7)])
    with torch.no_grad():
        all14 = torch.stack([f(Eg["audio"]) for f in G.members] + [f(Em["audio"]) for f in M.members])
        flat = F.normalize(all14.mean(0), dim=-1)
        per_expert = F.normalize((G(Eg["audio"]) + M(Em["audio"])) / 2, dim=-1)
    assert torch.allclose(project_experts([(Eg, G), (Em, M)], "audio"), flat, atol=1e-6)  # the default
    assert torch.allclose(project_experts([(Eg, G), (Em, M)], "audio", "per_expert"), per_expert, atol=1e-6)
    assert not torch.allclose(flat, per_expert, atol=1e-4)  # the two rules differ
    out = combination_bond(U, [(Eg, G), (Em, M)], 0.8, 0.5)
    assert torch.allclose(out["audio"], mix(U["audio"], flat, 0.8), atol=1e-6)
    with torch.no_grad():  # one expert: both rules are the MoP itself
        assert torch.allclose(project_experts([(Eg, G)], "text", "per_expert"), G(Eg["text"]), atol=1e-6)
        assert torch.allclose(project_experts([(Eg, G)], "text"), G(Eg["text"]), atol=1e-6)


def test_shuffled_targets_break_correspondence_only():
    src = {"audio": unit(50, 4, 1), "text": unit(50, 4, 2)}
    tgt = {"audio": unit(50, 6, 3), "text": unit(50, 6, 4)}
    (s, t), = shuffle_targets([(src, tgt)], seed=0)
    assert s is src  # the sources are untouched
    perm = [int(torch.argmax(tgt["audio"] @ row)) for row in t["audio"]]
    assert sorted(perm) == list(range(50)) and sum(p == i for i, p in enumerate(perm)) < 5
    assert torch.equal(t["text"], tgt["text"][perm])  # one permutation: a target tuple stays whole


def test_displacement_routes_audio_only_through_projector():
    torch.manual_seed(4)
    U = {"audio": unit(10, 8, 1), "image": unit(10, 8, 2), "text": unit(10, 8, 3)}
    V1 = {"image": unit(10, 6, 4), "text": unit(10, 6, 5)}
    V2 = {"image": unit(10, 6, 6), "text": unit(10, 6, 7)}
    P = Projector(8, 6, hidden=16).eval()
    a, b = displacement_bond(U, V1, P, 0.8, 0.8), displacement_bond(U, V2, P, 0.8, 0.8)
    with torch.no_grad():
        assert torch.allclose(a["audio"], P(U["audio"]), atol=1e-6)
        assert torch.equal(a["audio"], b["audio"])  # the expert never touches audio
        assert torch.allclose(a["image"], mix(P(U["image"]), V1["image"], 0.8), atol=1e-6)
        assert torch.allclose(a["text"], mix(P(U["text"]), V1["text"], 0.8), atol=1e-6)
    assert a["audio"].shape[1] == 6  # expert coordinates


def test_pseudo_tuple_weights_shared_across_spaces():
    hub = {"audio": unit(30, 8, 1), "image": unit(40, 8, 2), "text": unit(50, 8, 3)}
    exp = {"audio": unit(30, 5, 4), "text": unit(50, 5, 5)}
    pools = {"U": hub, "E": exp}
    tup = pseudo_tuples(pools, "U", ["image"], ["audio", "text"], tau_r=0.01)
    for m in ("audio", "text"):
        w = retrieval_weights(hub["image"], hub[m], 0.01)
        assert torch.allclose(w.sum(1), torch.ones(40), atol=1e-5)
        assert torch.allclose(tup["U"][m], F.normalize(w @ hub[m], dim=-1), atol=1e-5)
        assert torch.allclose(tup["E"][m], F.normalize(w @ exp[m], dim=-1), atol=1e-5)  # the same w
    # with identical memories in both spaces the two sides of every pseudo pair coincide
    same = pseudo_tuples({"U": hub, "E": {"audio": hub["audio"], "text": hub["text"]}}, "U", ["image"], ["audio", "text"])
    assert torch.allclose(same["U"]["audio"], same["E"]["audio"])
    # a seed modality keeps its own datum
    tup = pseudo_tuples(pools, "U", ["audio"], ["audio", "text"])
    assert torch.equal(tup["E"]["audio"], exp["audio"]) and torch.equal(tup["U"]["audio"], hub["audio"])


def test_short_bond_training_lowers_infonce():
    g = torch.Generator().manual_seed(0)
    rot = torch.linalg.qr(torch.randn(8, 8, generator=g))[0][:, :6]
    hub = {m: unit(300, 8, i) for i, m in enumerate(("audio", "image", "text"))}
    exp = {"audio": F.normalize(hub["audio"] @ rot, dim=-1), "text": F.normalize(hub["text"] @ rot, dim=-1)}
    datasets, overlap, src_only = bond_datasets({"U": hub, "E": exp}, "U", "E", "U", ["mix", "A"], tau_r=0.01)
    assert overlap == ("audio", "text") and src_only == ()
    cfg = BondTrainConfig(hidden=32, steps=60, batch=64, keep_best=False)

    def loss(bank):
        bank.eval()
        with torch.no_grad():
            out = {m: bank(torch.stack([d[0][m][:128] for d in datasets])) for m in overlap}
            return bond_loss(out, {m: torch.stack([d[1][m][:128] for d in datasets]) for m in overlap},
                             overlap, src_only, 0.05, True)

    before = loss(train_bond(datasets, overlap, src_only, BondTrainConfig(hidden=32, steps=0, keep_best=False), seed=0))
    after = loss(train_bond(datasets, overlap, src_only, cfg, seed=0))
    assert (after < 0.7 * before).all(), (before, after)


def test_dense_terms_use_source_only_modality():
    hub = {m: unit(100, 8, i) for i, m in enumerate(("audio", "image", "text"))}
    exp = {"image": unit(100, 6, 7), "text": unit(100, 6, 8)}
    datasets, overlap, src_only = bond_datasets({"U": hub, "E": exp}, "U", "U", "E", ["A"], tau_r=0.01)
    assert overlap == ("image", "text") and src_only == ("audio",)
    src, tgt = datasets[0]
    assert set(src) == {"audio", "image", "text"} and set(tgt) == {"image", "text"}
    out = {m: F.normalize(torch.randn(1, 16, 6), dim=-1) for m in src}
    t = {m: F.normalize(torch.randn(1, 16, 6), dim=-1) for m in tgt}
    with_dense = bond_loss(out, t, overlap, src_only, 0.05, True)
    without = bond_loss(out, t, overlap, src_only, 0.05, False)
    extra = batched_info_nce(out["audio"], t["image"], 0.05) + batched_info_nce(out["audio"], t["text"], 0.05)
    assert torch.allclose(with_dense, without + extra)
