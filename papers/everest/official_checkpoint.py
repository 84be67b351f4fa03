"""Official VideoMAE / EVEREST checkpoints loaded into this package's models by an explicit key map.

The official code (MCG-NJU/VideoMAE, patched by sunilhoho/EVEREST) saves `torch.save({'model': state,
'epoch': ..., 'args': argparse.Namespace, ...})`, or `{'module': state, ...}` through DeepSpeed. Its
two layouts, and the names they take here:

    pre-training (PretrainVisionTransformer)  ->  MaskedVideoAutoencoder
        encoder.patch_embed.proj.*          encoder.embed.proj.*
        encoder.blocks.N.*                  encoder.blocks.N.*
        encoder.norm.*                      norm.*
        encoder_to_decoder.weight           to_decoder.weight
        mask_token                          mask_token
        decoder.blocks.N.*                  decoder.N.*
        decoder.norm.*, decoder.head.*      decoder_norm.*, head.*
    fine-tuning (VisionTransformer, mean pooling)  ->  VideoClassifier
        patch_embed.proj.*, blocks.N.*      encoder.embed.proj.*, encoder.blocks.N.*
        fc_norm.*, head.*                   fc_norm.*, head.*
    inside every block: norm1, attn.qkv.weight, attn.q_bias, attn.v_bias, attn.proj, norm2 keep their
    names; mlp.fc1 / mlp.fc2 are mlp.0 / mlp.2 here.

The positional tables are fixed sinusoids in both codes and are not saved. Loading is strict: every
parameter of the model must come from the file and every tensor of the file must be used, with equal
shapes; anything else stops with one line that names the missing, unexpected and misshapen keys.
"""
from __future__ import annotations

import argparse
import pickle
import re
from pathlib import Path

import torch
from torch import nn

from shared.config import ConfigError

from .model import MaskedVideoAutoencoder, VideoClassifier

# our key prefix (regex) -> the official one, per model
PRETRAIN_KEYS = ((r"encoder\.embed\.proj\.", "encoder.patch_embed.proj."),
                 (r"encoder\.blocks\.(\d+)\.", r"encoder.blocks.\1."),
                 (r"norm\.", "encoder.norm."),
                 (r"to_decoder\.", "encoder_to_decoder."),
                 (r"mask_token$", "mask_token"),
                 (r"decoder\.(\d+)\.", r"decoder.blocks.\1."),
                 (r"decoder_norm\.", "decoder.norm."),
                 (r"head\.", "decoder.head."))
FINETUNE_KEYS = ((r"encoder\.embed\.proj\.", "patch_embed.proj."),
                 (r"encoder\.blocks\.(\d+)\.", r"blocks.\1."),
                 (r"fc_norm\.", "fc_norm."),
                 (r"head\.", "head."))
BLOCK_KEYS = ((r"\.mlp\.0\.", ".mlp.fc1."), (r"\.mlp\.2\.", ".mlp.fc2."))
LAYOUTS = {MaskedVideoAutoencoder: ("pre-training", PRETRAIN_KEYS), VideoClassifier: ("fine-tuning", FINETUNE_KEYS)}


class CheckpointMismatchError(ConfigError):
    """A checkpoint the config points at that does not hold the model's weights in the official layout."""


def official_key_map(model: nn.Module) -> dict[str, str]:
    """Each state-dict key of `model` (MaskedVideoAutoencoder or VideoClassifier) -> its official name."""
    if type(model) not in LAYOUTS:
        raise TypeError(f"no official layout for {type(model).__name__}; choose one of {[t.__name__ for t in LAYOUTS]}")
    _, renames = LAYOUTS[type(model)]
    names = {}
    for key in model.state_dict():
        pattern, official = next(((p, o) for p, o in renames if re.match(p, key)), (None, None))
        if pattern is None:
            raise KeyError(f"{key} has no official name: extend the key map in official_checkpoint.py")
        name = re.sub("^" + pattern, official, key, count=1)
        for inner, official_inner in BLOCK_KEYS:
            name = re.sub(inner, official_inner, name)
        names[key] = name
    return names


def read_official_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """The tensors of an official checkpoint (`torch.load(weights_only=True)`; argparse.Namespace, the
    `args` entry of the official files, allowed), unwrapped from 'model' or 'module'."""
    try:
        with torch.serialization.safe_globals([argparse.Namespace]):
            ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError) as err:
        lines = [line.strip() for line in str(err).splitlines() if line.strip()] or [type(err).__name__]
        first = next((line for line in lines if "Unsupported global" in line), lines[0])
        raise CheckpointMismatchError(f"{path} does not load as a weights-only torch checkpoint: {first}") from None
    state = next((ckpt[k] for k in ("model", "module") if isinstance(ckpt, dict) and k in ckpt), ckpt)
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointMismatchError(f"{path} holds no state dict (a dict of tensors, alone or under 'model' or 'module')")
    return state


def _listed(keys: list[str], limit: int = 4) -> str:
    more = f", … (+{len(keys) - limit})" if len(keys) > limit else ""
    return f"{len(keys)} [{', '.join(keys[:limit])}{more}]"


def load_official_checkpoint(model: nn.Module, path: str | Path) -> nn.Module:
    """Load the official checkpoint at `path` into `model` through `official_key_map`, strictly."""
    state = read_official_state_dict(path)
    names = official_key_map(model)
    ours = model.state_dict()
    missing = sorted(set(names.values()) - set(state))
    unexpected = sorted(set(state) - set(names.values()))
    misshapen = sorted(f"{o} {tuple(state[o].shape)} vs {tuple(ours[k].shape)}" for k, o in names.items()
                       if o in state and state[o].shape != ours[k].shape)
    if missing or unexpected or misshapen:
        layout, _ = LAYOUTS[type(model)]
        file_is_pretraining = any(k.startswith("encoder.") for k in state)
        if file_is_pretraining != (layout == "pre-training"):
            hint = f"; it looks like a {'pre-training' if file_is_pretraining else 'fine-tuning'} checkpoint"
        else:
            hint = "; is it an official VideoMAE/EVEREST checkpoint with the config's model widths and depths?"
        found = ", ".join(f"{what} {_listed(keys)}" for what, keys in (
            ("missing", missing), ("unexpected", unexpected), ("wrong shape (file vs model)", misshapen)) if keys)
        raise CheckpointMismatchError(f"{path} does not fit {type(model).__name__} (official {layout} layout): "
                                      f"{found}{hint}")
    model.load_state_dict({k: state[o] for k, o in names.items()}, strict=True)
    return model
