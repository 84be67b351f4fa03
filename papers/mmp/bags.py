"""Patient bags read from slide feature files when they are needed (the full profile).

A TCGA patient's bag is every patch of every slide: tens of thousands of 1024-d UNI features, up to
hundreds of MB, so a cohort of ~900 patients does not fit in RAM. `SlideBags` holds only each
patient's slide paths and reads a bag when it is indexed: K-means reads only each training bag's first
patches (`heads`), PANTHER aggregates one bag at a time, and a
training batch of ABMIL or the full-token Transformer reads its patients' bags and drops them after.
The synthetic profiles keep their bags as a list of arrays; the functions at the end serve both kinds.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np


def read_slide_features(path: str | Path) -> np.ndarray:
    """The [N, d] float32 features of one slide: the `features` array of an .h5 file, or the tensor of a
    .pt file (CLAM's `feats_pt` layout, loaded with `weights_only=True`); a leading batch axis of 1 is
    dropped, as the official loader does."""
    path = Path(path)
    if path.suffix == ".pt":
        import torch

        t = torch.load(path, map_location="cpu", weights_only=True)
        if isinstance(t, dict):
            t = t["features"]
        x = t.float().numpy()
    else:
        import h5py

        with h5py.File(path, "r") as f:
            x = np.asarray(f["features"][()], dtype=np.float32)
    return x.reshape(-1, x.shape[-1])


def read_slide_head(path: str | Path, n: int) -> np.ndarray:
    """The first `n` rows of one slide's features, reading only those rows: a slice of the .h5 dataset,
    or of a memory-mapped .pt tensor (what K-means needs of a training bag)."""
    path = Path(path)
    if path.suffix == ".pt":
        import torch

        t = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        if isinstance(t, dict):
            t = t["features"]
        return np.array(t.reshape(-1, t.shape[-1])[:n].float().numpy(), dtype=np.float32)
    import h5py

    with h5py.File(path, "r") as f:
        ds = f["features"]
        x = ds[0, :n] if ds.ndim == 3 else ds[:n]
    return np.asarray(x, dtype=np.float32).reshape(-1, x.shape[-1])


def slide_shape(path: str | Path) -> tuple[int, int]:
    """(N, d) of one slide's features from the file's header (.h5) or a memory map (.pt), without
    reading the features."""
    path = Path(path)
    if path.suffix == ".pt":
        import torch

        t = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        shape = (t["features"] if isinstance(t, dict) else t).shape
    else:
        import h5py

        with h5py.File(path, "r") as f:
            shape = f["features"].shape
    return int(np.prod(shape[:-1])), int(shape[-1])


class SlideBags:
    """A cohort's bags as slide paths. `bags[i]` reads patient i's [N_i, d] features (its slides
    concatenated in order); `bags[idx]` for an index array or slice is a view over those patients that
    reads nothing yet. `rows` keeps a subset of each patient's patches (None: all); `as_tensor` gives
    torch tensors instead of arrays (what the models read)."""

    def __init__(self, slides: list, rows: list | None = None, as_tensor: bool = False):
        self.slides = [[Path(p) for p in paths] for paths in slides]
        self.rows = rows
        self.as_tensor = as_tensor

    def __len__(self) -> int:
        return len(self.slides)

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)) or (hasattr(key, "ndim") and key.ndim == 0):
            return self.read(int(key))
        idx = range(len(self))[key] if isinstance(key, slice) else np.asarray(key).reshape(-1)
        return SlideBags([self.slides[i] for i in idx], None if self.rows is None else [self.rows[i] for i in idx],
                         self.as_tensor)

    def __iter__(self):
        for i in range(len(self)):
            yield self.read(i)

    def read(self, i: int):
        """Patient i's bag, read from its slide files now."""
        parts = [read_slide_features(p) for p in self.slides[i]]
        x = parts[0] if len(parts) == 1 else np.concatenate(parts)
        if self.rows is not None and self.rows[i] is not None:
            x = x[self.rows[i]]
        if self.as_tensor:
            import torch

            return torch.from_numpy(x)
        return x

    def head(self, i: int, n: int) -> np.ndarray:
        """The first `n` patches of patient i's bag (its slides in order), reading only those rows."""
        if self.rows is not None and self.rows[i] is not None:
            return np.asarray(self.read(i))[:n]
        parts, got = [], 0
        for path in self.slides[i]:
            if got >= n:
                break
            parts.append(read_slide_head(path, n - got))
            got += len(parts[-1])
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def patch_counts(self) -> list[int]:
        """N_i of every patient, from the files' headers (or the kept rows)."""
        if self.rows is None:
            return [sum(slide_shape(p)[0] for p in paths) for paths in self.slides]
        return [len(r) if r is not None else sum(slide_shape(p)[0] for p in paths)
                for paths, r in zip(self.slides, self.rows)]

    @property
    def dim(self) -> int:
        """The feature width d, from the first slide's header."""
        return slide_shape(self.slides[0][0])[1]

    def keep_rows(self, rows: list) -> "SlideBags":
        """The same patients keeping rows[i] of patient i's patches (None: all of them)."""
        return SlideBags(self.slides, list(rows), self.as_tensor)

    def tensors(self) -> "SlideBags":
        """The same bags read as torch tensors."""
        return SlideBags(self.slides, self.rows, as_tensor=True)


# ----------------------------------------------------------------------------- both kinds of bags
def patch_counts(bags) -> list[int]:
    """N_i of every bag, without reading lazy bags."""
    return bags.patch_counts() if isinstance(bags, SlideBags) else [len(b) for b in bags]


def heads(bags, idx, n: int):
    """The first `n` patches of each bag in `idx`, one at a time: for `SlideBags` only those rows are
    read, so a fold reads each bag in full once (PANTHER), not twice (K-means, then PANTHER)."""
    for i in idx:
        yield bags.head(int(i), n) if isinstance(bags, SlideBags) else bags[i][:n]


def feature_dim(bags) -> int:
    """The patch-feature width d, without reading lazy bags."""
    return bags.dim if isinstance(bags, SlideBags) else bags[0].shape[1]


def keep_rows(bags, rows: list):
    """Each bag reduced to rows[i] (None: whole): lazily for `SlideBags`, now for arrays."""
    if isinstance(bags, SlideBags):
        return bags.keep_rows(rows)
    return [b if r is None else b[r] for b, r in zip(bags, rows)]


def as_tensors(bags):
    """The bags as torch tensors (what the models read): lazily for `SlideBags`, now for arrays."""
    if isinstance(bags, SlideBags):
        return bags.tensors()
    import torch

    return [torch.from_numpy(b) for b in bags]
