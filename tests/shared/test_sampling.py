"""Samplers: DDP shards (disjoint, covering, like DistributedSampler), resume skips, batch draws."""
import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from shared.sampling import EpochSeededSampler, RandomBatchSampler, ResumableDataLoader, resumable


@pytest.mark.parametrize("n, w", [(10, 2), (11, 2), (11, 3), (7, 4)])
def test_shards_are_disjoint_and_cover_the_epoch(n, w):
    s = [EpochSeededSampler(n, seed=1, num_replicas=w, rank=r) for r in range(w)]
    for x in s:
        x.set_epoch(3)
    shards = [list(x) for x in s]
    assert all(len(sh) == len(s[0]) == -(-n // w) for sh in shards)
    assert set().union(*shards) == set(range(n))
    one = EpochSeededSampler(n, seed=1)
    one.set_epoch(3)
    perm = list(one)
    assert [i for step in zip(*shards) for i in step][:n] == perm          # rank r takes perm[r::w], padded
    if n % w == 0:
        assert sum(len(sh) for sh in shards) == n and len(set(sum(shards, []))) == n   # disjoint
    dropped = [list(EpochSeededSampler(n, 1, drop_last=True, num_replicas=w, rank=r)) for r in range(w)]
    assert all(len(d) == n // w for d in dropped) and len(set(sum(dropped, []))) == w * (n // w)


def test_padding_matches_torch_distributed_sampler():
    data = list(range(11))
    ours = [EpochSeededSampler(11, 0, shuffle=False, num_replicas=3, rank=r) for r in range(3)]
    torch_ = [DistributedSampler(data, num_replicas=3, rank=r, shuffle=False) for r in range(3)]
    assert [list(a) for a in ours] == [list(b) for b in torch_]


def test_skip_applies_once_and_only_to_its_epoch():
    s = EpochSeededSampler(10, seed=0)
    s.set_epoch(2)
    full = list(s)
    s.skip_next(2, 4)
    assert list(s) == full[4:] and list(s) == full
    s.skip_next(1, 4)                      # a checkpoint taken at the end of epoch 1
    assert list(s) == full


def test_random_batches_match_a_hand_written_loop_and_shard():
    g = torch.Generator().manual_seed(7)
    hand = [torch.randint(20, (4,), generator=g).tolist() for _ in range(5)]
    assert list(RandomBatchSampler(20, 4, 5, seed=7)) == hand
    halves = [list(RandomBatchSampler(20, 4, 5, seed=7, num_replicas=2, rank=r)) for r in range(2)]
    assert [a + b for a, b in zip(*halves)] != hand and all(sorted(a + b) == sorted(h)
                                                             for a, b, h in zip(*halves, hand))
    s = RandomBatchSampler(20, 4, 5, seed=7)
    s.skip_next(0, 3)
    assert list(s) == hand[3:]


def test_resumable_loader_counts_and_restores_its_place():
    ds = TensorDataset(torch.arange(12))
    dl = resumable(DataLoader(ds, batch_size=3, sampler=EpochSeededSampler(12, 0)))
    assert isinstance(dl, ResumableDataLoader)
    it = iter(dl)
    first = [next(it)[0].tolist() for _ in range(2)]
    state = dl.state_dict()
    assert state == {"epoch": 0, "batches": 2}
    rest = [b[0].tolist() for b in it]
    again = resumable(DataLoader(ds, batch_size=3, sampler=EpochSeededSampler(12, 0)))
    again.load_state_dict(state)
    assert [b[0].tolist() for b in again] == rest and again.state_dict()["batches"] == 4
    assert len(first) + len(rest) == len(dl) == 4
