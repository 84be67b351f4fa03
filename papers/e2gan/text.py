"""Frozen text encoders E(c) → (tokens (B, T, D), mask (B, T)), one interface for both profiles.

- `HashedTextEncoder` (smoke / tiny): each lower-cased word maps to a fixed N(0, 1) vector seeded by
  its SHA-256, so prompts that share words share tokens and a new concept reuses the base's words.
- `CLIPTextEncoder` (full): a CLIP text model and tokenizer from a local folder (e.g. the teacher's
  `text_encoder/` and `tokenizer/`), last hidden states.
The pooled embedding (mean over real tokens) is what k-means clusters to pick base concepts.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import torch


class HashedTextEncoder:
    def __init__(self, dim: int = 64, max_tokens: int = 8):
        self.dim, self.max_tokens = dim, max_tokens

    def word_vector(self, word: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "little")
        return np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)

    def encode(self, prompts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = torch.zeros(len(prompts), self.max_tokens, self.dim)
        mask = torch.zeros(len(prompts), self.max_tokens, dtype=torch.bool)
        for i, p in enumerate(prompts):
            words = p.lower().split()[: self.max_tokens]
            for j, w in enumerate(words):
                tokens[i, j] = torch.from_numpy(self.word_vector(w))
                mask[i, j] = True
        return tokens, mask


class CLIPTextEncoder:
    def __init__(self, path: str | Path, max_tokens: int = 77, device: str = "cpu"):
        from transformers import AutoTokenizer, CLIPTextModel

        path = Path(path)
        self.tokenizer = AutoTokenizer.from_pretrained(str(path / "tokenizer"), local_files_only=True)
        self.model = CLIPTextModel.from_pretrained(str(path / "text_encoder"), local_files_only=True).to(device).eval()
        self.max_tokens, self.device = max_tokens, device
        self.dim = self.model.config.hidden_size

    @torch.no_grad()
    def encode(self, prompts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        ids = self.tokenizer(prompts, padding="max_length", truncation=True, return_tensors="pt",
                             max_length=min(self.max_tokens, self.tokenizer.model_max_length))
        out = self.model(input_ids=ids.input_ids.to(self.device), attention_mask=ids.attention_mask.to(self.device))
        return out.last_hidden_state.float().cpu(), ids.attention_mask.bool()


def pooled(encoder, prompts: list[str]) -> np.ndarray:
    """Mean of each prompt's real tokens: the prompt embedding k-means clusters."""
    tokens, mask = encoder.encode(prompts)
    m = mask.float()[..., None]
    return ((tokens * m).sum(1) / m.sum(1).clamp(min=1)).numpy()
