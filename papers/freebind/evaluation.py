"""Retrieval (R@k, several captions per item) and zero-shot classification on embeddings, and one
table row per space/bond."""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from shared.samples import sample

COLUMNS = ("at_r1", "at_r5", "av_r1", "av_r5", "vt_r1", "vt_r5", "audio_acc", "image_acc")
TASKS = {"at": ("text", "audio"), "av": ("audio", "image"), "vt": ("text", "image")}  # query -> gallery


def recall_at_k(query: torch.Tensor, gallery: torch.Tensor, ks=(1, 5), query_item: Sequence[int] | None = None,
                gallery_item: Sequence[int] | None = None) -> dict[int, float]:
    """R@k in percent, as the paper scores retrieval with several captions per item.

    query_item[i] / gallery_item[j]: the item each row belongs to (default: row i is item i). Query i
    is a hit at k when a gallery row of its own item ranks in the top k. So for text→X each caption
    is a query (query_item = the caption's item), and for X→text an item is a hit when any of its
    captions ranks in the top k (gallery_item = the captions' items).

    Ties count against the query: the rank of the best-scoring correct row is the number of wrong
    rows that score at least as high.
    """
    sims = query @ gallery.t()
    qi = torch.arange(len(query)) if query_item is None else torch.as_tensor(np.asarray(query_item))
    gi = torch.arange(len(gallery)) if gallery_item is None else torch.as_tensor(np.asarray(gallery_item))
    correct = qi[:, None] == gi[None, :]
    if not bool(correct.any(1).all()):
        raise ValueError("every query needs at least one gallery row of its item")
    best = sims.masked_fill(~correct, -math.inf).max(1).values
    rank = ((sims >= best[:, None]) & ~correct).sum(1)  # wrong rows scoring >= the best correct one
    return {k: 100.0 * int((rank < k).sum()) / len(rank) for k in ks}


def class_embeddings(prompt_emb: torch.Tensor, n_classes: int) -> torch.Tensor:
    """Average the prompt embeddings of each class (rows grouped by class), then L2-normalise."""
    if len(prompt_emb) % n_classes:
        raise ValueError(f"{len(prompt_emb)} prompt rows do not split into {n_classes} classes")
    return F.normalize(prompt_emb.reshape(n_classes, -1, prompt_emb.shape[-1]).mean(1), dim=-1)


def zero_shot_accuracy(x: torch.Tensor, class_emb: torch.Tensor, labels) -> float:
    pred = (x @ class_emb.t()).argmax(1).numpy()
    return 100.0 * int(np.sum(pred == np.asarray(labels))) / len(pred)


def evaluate(emb: Mapping[str, torch.Tensor], caption_item: Sequence[int], labels, n_classes: int) -> dict:
    """emb: {modality: (N, d)}; text rows are the test captions (caption r describes item
    caption_item[r]; several per item) followed by the class prompts (grouped by class).

    Text→X retrieval uses every caption as a query. Returns every column the space supports (others None).
    """
    row = {c: None for c in COLUMNS}
    n_cap = len(caption_item)
    text = emb.get("text")
    for task, (q, g) in TASKS.items():
        if q in emb and g in emb:
            if q == "text":
                r = recall_at_k(emb[q][:n_cap], emb[g], query_item=caption_item)
            else:
                r = recall_at_k(emb[q], emb[g])
            row[f"{task}_r1"], row[f"{task}_r5"] = r[1], r[5]
    if text is not None:
        cls = class_embeddings(text[n_cap:], n_classes)
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
