"""The primary claim that binding learns a correspondence across spaces, on a small fixture world where
it can: U's audio is weak, the expert's audio and text are strong, and only a projector trained on the
pseudo tuples carries the expert's audio into U's image coordinates. A bond that trains nothing (an
identity projector) must not pass it."""
from pathlib import Path

import torch
import torch.nn.functional as F

from papers.freebind.bonds import BondTrainConfig, bond_datasets, combination_bond, mop_from_bank, shuffle_targets, train_bond
from papers.freebind.evaluation import recall_at_k, seed_sample
from shared.claims import evaluate_claim, load_claims

PAPER = Path(__file__).resolve().parents[2] / "papers" / "freebind"
VERSATILE = (0.5, 0.1)
MEMBERS = ("mix", "A", "T")


def _world(seed: int, n: int) -> tuple[dict, dict]:
    """n events with a latent z (6-d); U (8-d, its modalities aligned by one map): clean image and text,
    audio drowned in noise; the expert E (6-d, another map): clean audio and text. The maps are fixed; the
    events and noise follow `seed`."""
    maps = torch.Generator().manual_seed(123)
    R, M = torch.randn(6, 8, generator=maps), torch.randn(6, 6, generator=maps)
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, 6, generator=g)

    def emb(w, noise):
        return F.normalize(z @ w + noise * torch.randn(n, w.shape[1], generator=g), dim=-1)

    U = {"image": emb(R, 0.2), "text": emb(R, 0.2), "audio": emb(R, 2.5)}
    E = {"audio": emb(M, 0.2), "text": emb(M, 0.2)}
    return U, E


def _av_r1(audio: torch.Tensor, image: torch.Tensor) -> float:
    return recall_at_k(audio, image)[1]


def _identity(x: torch.Tensor) -> torch.Tensor:
    """Trains nothing: the expert's coordinates padded into U's."""
    return F.pad(x, (0, 2))


def _arms(seed: int, identity: bool) -> tuple[float, float]:
    """Versatile audio→image R@1 of the bond and of the same bond trained on shuffled pseudo tuples."""
    U_pool, E_pool = _world(1000 + seed, 1500)
    pools = {"U": U_pool, "E": E_pool}
    datasets, overlap, src_only = bond_datasets(pools, "U", "E", "U", MEMBERS, tau_r=0.01)
    cfg = BondTrainConfig(hidden=32, steps=150, batch=128, keep_best=False)
    shuffled = mop_from_bank(train_bond(shuffle_targets(datasets, seed + 1), overlap, src_only, cfg, seed=seed))
    bond = _identity if identity else mop_from_bank(train_bond(datasets, overlap, src_only, cfg, seed=seed))
    U, E = _world(seed, 300)
    with torch.no_grad():
        arms = [combination_bond(U, [(E, p)], *VERSATILE) for p in (bond, shuffled)]
    return tuple(_av_r1(a["audio"], a["image"]) for a in arms)


def _primary(identity: bool):
    claim = next(e for e in load_claims(PAPER / "claims.yaml") if e["id"] == "freebind.versatile_av_beats_shuffled")
    assert claim["primary"] and claim["test"]["ref"] == "main_table.table.parallel_shuffled_versatile.av_r1"
    bond, shuffled = zip(*(_arms(seed, identity) for seed in range(4)))
    metrics = {"main_table": {"table": {"parallel_versatile": {"av_r1": seed_sample(bond)},
                                        "parallel_shuffled_versatile": {"av_r1": seed_sample(shuffled)}}}}
    return evaluate_claim(claim, metrics, "tiny")


def test_primary_passes_with_a_trained_bond_and_not_with_an_identity_projector():
    trained = _primary(identity=False)
    assert trained.status == "PASS", trained.note
    untrained = _primary(identity=True)
    assert untrained.status in ("FAIL", "INCONCLUSIVE"), untrained.note
