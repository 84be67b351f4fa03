"""Caches keyed by what made them: a trained model or checkpoint is reused only when the config hash
and the seed it was made with equal the ones of the run asking for it.

A cached file `path` carries its key beside it, in `path.key.json`::

    {"config_hash": "3f2a…", "seed": 1}

`stale_reason(path, key)` says why an existing file cannot be reused (no key, another seed, another
config hash), and `reusable` logs that reason as one line before the caller retrains. The config
passed to `cache_key` should be everything that decides the artifact (e.g. the data and training
sections of a paper's config), so an edited config that reruns into the same results folder
retrains what it changed instead of silently reusing it. `shared.training.fit` uses this for
Lightning's `last.ckpt`; `save`/`load` do the same for any torch-saved object.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Mapping

import torch

from .config import config_hash

log = logging.getLogger("shared.run_cache")
KEY_SUFFIX = ".key.json"


def cache_key(config: Mapping | None, seed: int) -> dict:
    """The key of an artifact made from `config` (None: the seed alone decides it) with `seed`."""
    return {"config_hash": None if config is None else config_hash(config), "seed": int(seed)}


def key_file(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(path.name + KEY_SUFFIX)


def write_key(path: str | Path, key: Mapping) -> Path:
    out = key_file(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(dict(key), sort_keys=True) + "\n")
    return out


def read_key(path: str | Path) -> dict | None:
    kf = key_file(path)
    if not kf.is_file():
        return None
    try:
        return json.loads(kf.read_text())
    except json.JSONDecodeError:
        return None


def stale_reason(path: str | Path, key: Mapping) -> str | None:
    """None when `path` exists and was made with `key`; otherwise why it cannot be reused."""
    path = Path(path)
    if not path.exists():
        return f"{path} does not exist"
    stored = read_key(path)
    if stored is None:
        return f"{path} has no readable key ({key_file(path).name}), so what made it is unknown"
    if stored.get("seed") != key.get("seed"):
        return f"{path} was made with seed {stored.get('seed')}, this run has seed {key.get('seed')}"
    if stored.get("config_hash") != key.get("config_hash"):
        return (f"{path} was made with config hash {stored.get('config_hash')}, this run's is "
                f"{key.get('config_hash')}")
    return None


def reusable(path: str | Path, key: Mapping, what: str = "cache") -> bool:
    """True when `path` can be reused; when it exists but is stale, log one line saying why."""
    if not Path(path).exists():
        return False
    reason = stale_reason(path, key)
    if reason is not None:
        log.warning("%s: not reused, retraining: %s", what, reason)
        return False
    return True


def save(path: str | Path, obj: Any, key: Mapping) -> Path:
    """torch.save `obj` (tensors, state dicts, plain containers) with its key beside it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(obj, path)
    write_key(path, key)
    return path


def load(path: str | Path, key: Mapping, what: str = "cache") -> Any | None:
    """The object saved at `path` if its key matches (weights_only load); None (with one logged line
    when the file exists but is stale) otherwise."""
    if not reusable(path, key, what):
        return None
    return torch.load(path, map_location="cpu", weights_only=True)
