"""The pseudo-tuple memo: the MoP members and the bonds over the same pools read each pseudo-embedding
once computed, and get bitwise what computing it again gives."""
import torch
import torch.nn.functional as F

from papers.freebind import bonds
from papers.freebind.bonds import MOP_POOLS, bond_datasets, pseudo_tuples


def unit(n, d, seed):
    return F.normalize(torch.randn(n, d, generator=torch.Generator().manual_seed(seed)), dim=-1)


def pools():
    hub = {"audio": unit(30, 8, 1), "image": unit(40, 8, 2), "text": unit(50, 8, 3)}
    e1 = {"audio": unit(30, 5, 4), "text": unit(50, 5, 5)}
    e2 = {"image": unit(40, 6, 6), "text": unit(50, 6, 7)}
    return {"U": hub, "E1": e1, "E2": e2}


def test_members_with_a_shared_memo_equal_their_own_computation():
    p = pools()
    members = list(MOP_POOLS)
    shared, _, _ = bond_datasets(p, "U", "E1", "U", members, tau_r=0.01, memo={})
    for name, (src, tgt) in zip(members, shared):
        alone, _, _ = bond_datasets(p, "U", "E1", "U", [name], tau_r=0.01, memo=None)
        for got, want in ((src, alone[0][0]), (tgt, alone[0][1])):
            assert got.keys() == want.keys()
            for m in got:
                assert torch.equal(got[m], want[m]), (name, m)


def test_the_memo_computes_each_retrieval_once_across_members_and_bonds(monkeypatch):
    calls = []
    real = bonds.retrieval_weights
    monkeypatch.setattr(bonds, "retrieval_weights", lambda q, m, t: calls.append(1) or real(q, m, t))
    p, memo = pools(), {}
    first, _, _ = bond_datasets(p, "U", "E1", "U", list(MOP_POOLS), tau_r=0.01, memo=memo)
    # E1 → U wants audio and text: seeds image (→ audio, → text), audio (→ text), text (→ audio), four
    # retrievals for the seven members (twelve seed slots)
    assert len(calls) == 4
    again, _, _ = bond_datasets(p, "U", "E1", "U", list(MOP_POOLS), tau_r=0.01, memo=memo)
    assert len(calls) == 4   # the same bond again reads the memo
    # E2 → U wants image and text: audio → image, text → image are new; audio → text and image → text are
    # in the memo for space U but not for space E2, so their weights are computed again
    _, _, _ = bond_datasets(p, "U", "E2", "U", list(MOP_POOLS), tau_r=0.01, memo=memo)
    assert len(calls) == 8
    for (s1, t1), (s2, t2) in zip(first, again):
        assert all(torch.equal(s1[m], s2[m]) for m in s1) and all(torch.equal(t1[m], t2[m]) for m in t1)
    # another τr is another retrieval, not a memo hit
    pseudo_tuples(p, "U", ["audio"], ["audio", "text"], tau_r=0.02, memo=memo)
    assert len(calls) == 9
