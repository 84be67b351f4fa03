"""Retrieval (R@k) and zero-shot classification on embeddings, and one table row per space/bond."""
from __future__ import annotations

import math
from typing import Mapping

import numpy as np
import torch
import torch.nn.functional as F

from shared.samples import sample

COLUMNS = ("at_r1", "at_r5", "av_r1", "av_r5", "vt_r1", "vt_r5", "audio_acc", "image_acc")
TASKS = {"at": ("text", "audio"), "av": ("audio", "image"), "vt": ("text", "image")}  # query -> gallery


def recall_at_k(query: torch.Tensor, gallery: torch.Tensor, ks=(1, 5)) -> dict[int, float]:
    """Row i of `query` matches row i of `gallery`; R@k in percent (ties count against the query)."""
    sims = query @ gallery.t()
    true = sims.diagonal().unsqueeze(1)
    rank = (sims > true).sum(1)  # number of gallery items strictly better than the match
    return {k: 100.0 * int((rank < k).sum()) / len(rank) for k in ks}


def class_embeddings(prompt_emb: torch.Tensor, n_classes: int) -> torch.Tensor:
    """Average the prompt embeddings of each class (rows grouped by class), then L2-normalise."""
    return F.normalize(prompt_emb.reshape(n_classes, -1, prompt_emb.shape[-1]).mean(1), dim=-1)


def zero_shot_accuracy(x: torch.Tensor, class_emb: torch.Tensor, labels) -> float:
    pred = (x @ class_emb.t()).argmax(1).numpy()
    return 100.0 * int(np.sum(pred == np.asarray(labels))) / len(pred)


def evaluate(emb: Mapping[str, torch.Tensor], n_test: int, labels, n_classes: int) -> dict:
    """emb: {modality: (N, d)}; text rows are the n_test test captions followed by the class prompts.

    Returns every column the space supports (others are None).
    """
    row = {c: None for c in COLUMNS}
    text = emb.get("text")
    for task, (q, g) in TASKS.items():
        if q in emb and g in emb:
            qe = emb[q][:n_test] if q == "text" else emb[q]
            r = recall_at_k(qe, emb[g][:n_test])
            row[f"{task}_r1"], row[f"{task}_r5"] = r[1], r[5]
    if text is not None:
        cls = class_embeddings(text[n_test:], n_classes)
        for mod in ("audio", "image"):
            if mod in emb:
                row[f"{mod}_acc"] = zero_shot_accuracy(emb[mod], cls, labels)
    return row


def seed_sample(values) -> dict | None:
    """One value per seed (in seed order) as a `shared.samples.sample`; None when the space lacks the
    column on every seed. A seed that lacks it alone would be NaN, which the ledger reports as FAIL."""
    vals = list(values)
    if all(v is None for v in vals):
        return None
    return sample([math.nan if v is None else v for v in vals], "seed")
