"""Batches of patients: `make_batch` selects patients from a fold's inputs, `PatientBatches` is the
DataLoader's collate_fn of a survival fit (the inputs with times, events and NLL bins)."""
from __future__ import annotations

import numpy as np
import torch


def make_batch(data: dict, idx) -> dict:
    """Select patients `idx` from {"hist": tensor, "genes": tensor, "bags": list} (keys optional).
    Bags in a `bags.SlideBags` are selected as a view (index-array indexing): nothing is read until
    a model that uses them iterates the batch's bags."""
    idx = np.asarray(idx)
    batch = {}
    for key, value in data.items():
        if isinstance(value, list):
            batch[key] = [value[i] for i in idx]
        else:
            batch[key] = value[torch.as_tensor(idx)]
    return batch


class PatientBatches:
    """collate_fn: patient indices → {"inputs": model batch, "time", "event", "bin"} (tensors)."""

    def __init__(self, data: dict, time, event, bins=None):
        self.data, self.time, self.event, self.bins = data, np.asarray(time, float), np.asarray(event, bool), bins

    def __call__(self, idx) -> dict:
        idx = np.asarray(idx)
        batch = {"inputs": make_batch(self.data, idx), "time": torch.as_tensor(self.time[idx]),
                 "event": torch.as_tensor(self.event[idx])}
        if self.bins is not None:
            batch["bin"] = torch.as_tensor(self.bins[idx])
        return batch
