"""Seeded samplers that shard under DDP and resume mid-epoch, and the data loader that saves their place.

- `EpochSeededSampler`: a permutation of 0..n-1 from (seed, epoch); under DDP rank r of W takes
  `perm[r::W]` of the permutation padded (or, with `drop_last`, cut) to a multiple of W, like
  `torch.utils.data.DistributedSampler`. One process (W = 1) gives the permutation itself.
- `RandomBatchSampler`: `steps` batches of `batch` indices drawn with replacement from a generator
  seeded with `seed` (epoch 0; later epochs from (seed, epoch)); under DDP rank r takes `idx[r::W]` of
  every global batch.
- `random_batches(data, batch, steps, seed)`: a DataLoader of `data.batch(idx)` over a
  `RandomBatchSampler` (one indexing per batch, no per-item collation).
- `ResumableDataLoader`: a `DataLoader` that Lightning checkpoints (`state_dict`: the sampler's epoch
  and the batches of it already delivered), so a run resumed from a mid-epoch checkpoint skips exactly
  the batches it had trained on (the skipped indices are drawn, not loaded).

The rank and world size are read when an epoch is iterated (the process group exists only once
`trainer.fit` has started), unless given.
"""
from __future__ import annotations

from typing import Iterator

import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from .seeding import derive_seed


def world(num_replicas: int | None = None, rank: int | None = None) -> tuple[int, int]:
    """(world size, rank): the given ones, else the process group's, else (1, 0)."""
    dist = torch.distributed
    if num_replicas is None or rank is None:
        on = dist.is_available() and dist.is_initialized()
        num_replicas = num_replicas if num_replicas is not None else (dist.get_world_size() if on else 1)
        rank = rank if rank is not None else (dist.get_rank() if on else 0)
    if not 0 <= rank < num_replicas:
        raise ValueError(f"rank {rank} is outside a world of {num_replicas}")
    return num_replicas, rank


class _Skippable:
    """A one-shot skip of the first `n` items of the next iteration of `epoch` (mid-epoch resume)."""

    epoch = 0
    _skip: tuple[int, int] | None = None

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def skip_next(self, epoch: int, n: int) -> None:
        self._skip = (int(epoch), int(n))

    def _take_skip(self) -> int:
        skip, self._skip = self._skip, None
        return skip[1] if skip is not None and skip[0] == self.epoch else 0


class EpochSeededSampler(_Skippable, Sampler[int]):
    """Shuffles 0..n-1 with a permutation that depends only on (seed, epoch); shards it under DDP.

    Lightning calls `set_epoch` on samplers that have it, so a resumed run sees the same order.
    stream: the name the permutation's seed is derived under, derive_seed(seed, stream, epoch) (a
    port of a hand-written loop keeps that loop's name, and with it its shuffles).
    """

    def __init__(self, n: int, seed: int, shuffle: bool = True, drop_last: bool = False,
                 num_replicas: int | None = None, rank: int | None = None, stream: str = "sampler"):
        self.n, self.seed, self.shuffle, self.drop_last, self.stream = n, seed, shuffle, drop_last, stream
        self.num_replicas, self.rank, self.epoch = num_replicas, rank, 0

    def _shard_size(self, w: int) -> int:
        return self.n // w if self.drop_last else -(-self.n // w)

    def indices(self) -> list[int]:
        """This rank's indices of the current epoch, in order."""
        w, r = world(self.num_replicas, self.rank)
        if not self.shuffle:
            order = list(range(self.n))
        else:
            g = torch.Generator().manual_seed(derive_seed(self.seed, self.stream, self.epoch))
            order = torch.randperm(self.n, generator=g).tolist()
        total = self._shard_size(w) * w
        if total > len(order):   # pad by repeating the start of the permutation (DistributedSampler)
            order = (order * -(-total // len(order)))[:total]
        return order[:total][r:total:w]

    def __iter__(self) -> Iterator[int]:
        skip = self._take_skip()
        return iter(self.indices()[skip:])

    def __len__(self) -> int:
        return self._shard_size(world(self.num_replicas, self.rank)[0])


class RandomBatchSampler(_Skippable, Sampler[list[int]]):
    """`steps` batches of `batch` indices in [0, n), drawn with replacement from one seeded generator.

    The draws are `torch.randint(n, (batch,), generator=g)` per step, g seeded with `seed` at epoch 0
    (so a hand-written loop drawing the same way sees the same batches). Under DDP every rank draws
    the same global batch and keeps `idx[rank::world]`.
    """

    def __init__(self, n: int, batch: int, steps: int, seed: int,
                 num_replicas: int | None = None, rank: int | None = None):
        self.n, self.batch, self.steps, self.seed = n, batch, steps, seed
        self.num_replicas, self.rank, self.epoch = num_replicas, rank, 0

    def __iter__(self) -> Iterator[list[int]]:
        w, r = world(self.num_replicas, self.rank)
        if self.batch % w:
            raise ValueError(f"batch {self.batch} does not split over {w} processes")
        g = torch.Generator().manual_seed(self.seed if self.epoch == 0 else derive_seed(self.seed, "epoch", self.epoch))
        skip = self._take_skip()
        for step in range(self.steps):
            idx = torch.randint(self.n, (self.batch,), generator=g)
            if step >= skip:
                yield idx[r::w].tolist()

    def __len__(self) -> int:
        return self.steps


class IndexBatches(Dataset):
    """`data.batch(idx)` for the whole list of indices a batch sampler yields (no per-item collation);
    `data` has `__len__` and `batch(LongTensor) -> batch`."""

    def __init__(self, data):
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def __getitems__(self, idx: list[int]):
        return self.data.batch(torch.tensor(idx, dtype=torch.long))

    def __getitem__(self, i: int):
        return self.data.batch(torch.tensor([i], dtype=torch.long))


def _as_is(batch):
    return batch


def random_batches(data, batch: int, steps: int, seed: int) -> DataLoader:
    """`steps` batches of `batch` items of `data` drawn with replacement (generator seeded with `seed`,
    as `RandomBatchSampler` draws); under DDP each process takes its share of every batch."""
    return DataLoader(IndexBatches(data), batch_sampler=RandomBatchSampler(len(data), batch, steps, seed),
                      collate_fn=_as_is)


class ResumableDataLoader(DataLoader):
    """A DataLoader whose place in the epoch is saved in Lightning checkpoints and restored on resume.

    Its sampler (or batch sampler) must have `set_epoch`, `epoch` and `skip_next(epoch, n)`.
    """

    def _source(self):
        custom = self.batch_sampler if hasattr(self.batch_sampler, "skip_next") else None
        source = custom or self.sampler
        if not hasattr(source, "skip_next"):
            raise TypeError("ResumableDataLoader needs an EpochSeededSampler or a RandomBatchSampler")
        return source, custom is None

    def __iter__(self):
        source, per_sample = self._source()
        pending = source._skip
        self._delivered = pending[1] // (self.batch_size if per_sample else 1) \
            if pending is not None and pending[0] == source.epoch else 0
        for batch in super().__iter__():
            self._delivered += 1
            yield batch

    def state_dict(self) -> dict:
        source, _ = self._source()
        return {"epoch": int(source.epoch), "batches": int(getattr(self, "_delivered", 0))}

    def load_state_dict(self, state: dict) -> None:
        source, per_sample = self._source()
        source.skip_next(state["epoch"], state["batches"] * (self.batch_size if per_sample else 1))


def resumable(loader):
    """`loader` as a ResumableDataLoader when its sampler can resume (same data, order and batches);
    anything else is returned unchanged."""
    if isinstance(loader, ResumableDataLoader) or not isinstance(loader, DataLoader):
        return loader
    if hasattr(loader.batch_sampler, "skip_next"):
        kwargs = {"batch_sampler": loader.batch_sampler}
    elif hasattr(loader.sampler, "skip_next"):
        kwargs = {"sampler": loader.sampler, "batch_size": loader.batch_size, "drop_last": loader.drop_last}
    else:
        return loader
    return ResumableDataLoader(loader.dataset, num_workers=loader.num_workers, collate_fn=loader.collate_fn,
                               pin_memory=loader.pin_memory, **kwargs)


def is_sharded(loader) -> bool:
    """Whether `loader`'s sampler shards itself across DDP ranks (ours do)."""
    return isinstance(getattr(loader, "sampler", None), EpochSeededSampler) or \
        isinstance(getattr(loader, "batch_sampler", None), RandomBatchSampler)
