"""Live re-scoring for the notebook: mix U with the experts' projections at any (λa, λt)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from .bonds import combination_bond
from .evaluation import evaluate
from .world import CLS0, COL0, ENV0, FIL0, INT0, N_CLASSES, SYNONYMS

COLOUR_WORDS = ["red", "green", "blue", "yellow", "violet"]
ENV_WORDS = ["rising", "fading", "steady", "burst", "double"]
INT_WORDS = ["soft", "medium", "loud"]


def load_explore(results_dir: str | Path) -> dict | None:
    path = Path(results_dir) / "checkpoints" / "bonds_s0" / "explore.npz"
    if not path.is_file():
        return None
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def bonded(data: dict, lam_a: float, lam_t: float) -> dict:
    """Combination bond at (λa, λt) from the saved test embeddings (parallel: both experts)."""
    U = {m: torch.from_numpy(data[f"U_{m}"]) for m in ("audio", "image", "text")}
    hat = {m: torch.from_numpy(data[f"hat_{m}"]) for m in ("audio", "text")}
    return combination_bond(U, [(hat, lambda x: x)], lam_a, lam_t)  # projections already applied


def rescore(data: dict, lam_a: float, lam_t: float) -> dict:
    return evaluate(bonded(data, lam_a, lam_t), data["caption_item"], data["labels"], N_CLASSES)


def n_queries(data: dict) -> int:
    """The number of text queries: every test caption (several per item)."""
    return len(data["caption_item"])


def describe_tokens(tokens) -> str:
    words = []
    for t in tokens:
        t = int(t)
        if t == 0:
            continue
        if t < COL0:
            words.append(f"digit{(t - CLS0) // SYNONYMS}" + ("" if (t - CLS0) % SYNONYMS == 0 else "'"))
        elif t < ENV0:
            words.append(COLOUR_WORDS[t - COL0])
        elif t < INT0:
            words.append(ENV_WORDS[t - ENV0])
        elif t < FIL0:
            words.append(INT_WORDS[t - INT0])
        else:
            words.append("·")
    return " ".join(words)


def neighbours(data: dict, lam_a: float, lam_t: float, query: int, k: int = 3) -> dict:
    """Caption `query` (any of the test captions) → its k nearest audios and images in the bonded
    space, with their attributes; `match` marks the caption's own item."""
    emb = bonded(data, lam_a, lam_t)
    n = int(data["n_test"])
    item = int(data["caption_item"][query])
    q = emb["text"][query]
    out = {"query": describe_tokens(data["tokens"][query]), "item": item,
           "truth": dict(cls=int(data["labels"][item]), colour=COLOUR_WORDS[int(data["colour"][item])],
                         envelope=ENV_WORDS[int(data["envelope"][item])])}
    for mod in ("audio", "image"):
        idx = torch.topk(emb[mod][:n] @ q, k).indices.tolist()
        out[mod] = [dict(index=i, cls=int(data["labels"][i]), colour=COLOUR_WORDS[int(data["colour"][i])],
                         envelope=ENV_WORDS[int(data["envelope"][i])], match=i == item) for i in idx]
    return out
