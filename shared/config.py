"""Load and validate a paper's `config.yaml` for one profile.

Format (one file per paper)::

    defaults:          # every key, with its default value; the types here are the schema
      seed: 0
      model: {dim: 64, depth: 2}
      weights_path: null   # null: any type (or a path that only the full profile sets)
    profiles:          # smoke / tiny / full: overrides of `defaults`, nothing new
      smoke: {model: {dim: 8}}
      tiny: {}
      full: {model: {dim: 1024}, weights_path: /data/weights}

A profile may only override keys that `defaults` declares, with a value of the declared type
(an int is accepted where a float is declared). Keys with a closed set of values (`CHOICES` for the
keys every paper shares, plus a paper's optional top-level `choices: {key.path: [values]}`) are
checked too, so `--set logging.wandb=offlne` stops at start-up, not hours later. Anything else is
refused with one message that lists the valid choices.
"""
from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

import yaml

PROFILES = ("smoke", "tiny", "full")
DEFAULT_PROFILE = "tiny"
# Closed value sets of the keys the papers share (a key a paper does not have is skipped). None is
# always allowed where the default is None ("from `device`" / "auto").
CHOICES: dict[str, tuple] = {
    "device": ("auto", "cpu", "cuda", "meta"),   # meta: shape-only runs (tests, the cost plan)
    "logging.wandb": ("disabled", "offline", "online"),
    "trainer.wandb": ("disabled", "offline", "online"),
    "trainer.accelerator": ("auto", "cpu", "gpu", "cuda"),
    "trainer.strategy": ("auto", "ddp", "ddp_spawn", "ddp_find_unused_parameters_true", "fsdp"),
    "trainer.precision": ("64-true", "32-true", "16-mixed", "bf16-mixed", "16-true", "bf16-true", 64, 32, 16),
}


class ConfigError(ValueError):
    """A config file, profile, key or value that cannot be used."""


class Config(dict):
    """A nested dict that also reads as attributes: `cfg.model.dim` == `cfg["model"]["dim"]`."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"config has no key {name!r}; keys: {sorted(self)}") from None

    @classmethod
    def wrap(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return cls({k: cls.wrap(v) for k, v in value.items()})
        if isinstance(value, list):
            return [cls.wrap(v) for v in value]
        return value

    def to_dict(self) -> dict:
        return json.loads(json.dumps(self))


def _type_name(value: Any) -> str:
    return type(value).__name__


def _check_type(default: Any, value: Any, where: str) -> None:
    if default is None or value is None:
        return
    if isinstance(default, bool) or isinstance(value, bool):
        ok = isinstance(default, bool) and isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float))
    elif isinstance(default, int):
        ok = isinstance(value, int)
    elif isinstance(default, (list, tuple)):
        ok = isinstance(value, (list, tuple))
    else:
        ok = isinstance(value, type(default))
    if not ok:
        raise ConfigError(
            f"{where}: expected {_type_name(default)} (default {default!r}), got {_type_name(value)} {value!r}"
        )


def merge(defaults: Mapping, overrides: Mapping, where: str) -> dict:
    """Deep-merge `overrides` into `defaults`, refusing unknown keys and wrong types."""
    out = copy.deepcopy(dict(defaults))
    for key, value in overrides.items():
        path = f"{where}.{key}"
        if key not in defaults:
            raise ConfigError(f"unknown key {path!r}; valid keys here: {sorted(defaults)}")
        default = defaults[key]
        if isinstance(default, Mapping) and default:
            if not isinstance(value, Mapping):
                raise ConfigError(f"{path}: expected a mapping with keys {sorted(default)}, got {value!r}")
            out[key] = merge(default, value, path)
        else:
            _check_type(default, value, path)
            out[key] = copy.deepcopy(value)
    return out


def parse_override(text: str) -> tuple[list[str], Any]:
    """`model.dim=32` -> (["model", "dim"], 32); the value is parsed as YAML."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} is not of the form key.path=value")
    key, value = text.split("=", 1)
    return key.split("."), yaml.safe_load(value)


def _nest(path: list[str], value: Any) -> dict:
    out: Any = value
    for part in reversed(path):
        out = {part: out}
    return out


def load_config(path: str | Path, profile: str = DEFAULT_PROFILE, overrides: list[str] | None = None,
                overlay: str | Path | None = None) -> Config:
    """Return the validated config of `profile` from the YAML file at `path`.

    `overlay`: a YAML file of config keys merged after the profile (the full profile's rehearsal: its
    paths point at stand-in assets, its sizes shrunk); `overrides` are `key.path=value` strings applied
    last. Both are validated like the profile (known keys, default types).
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no config file at {path}")
    raw = yaml.safe_load(path.read_text()) or {}
    if set(raw) - {"defaults", "profiles", "choices"} or "defaults" not in raw:
        raise ConfigError(f"{path}: top-level keys must be 'defaults', 'profiles' and optionally 'choices', "
                          f"got {sorted(raw)}")
    profiles = raw.get("profiles") or {}
    unknown_profiles = set(profiles) - set(PROFILES)
    if unknown_profiles:
        raise ConfigError(f"{path}: unknown profile(s) {sorted(unknown_profiles)}; valid profiles: {list(PROFILES)}")
    if profile not in PROFILES:
        raise ConfigError(f"unknown profile {profile!r}; valid profiles: {list(PROFILES)}")
    cfg = merge(raw["defaults"], profiles.get(profile) or {}, f"{path.name}[{profile}]")
    if overlay is not None:
        overlay = Path(overlay)
        if not overlay.is_file():
            raise ConfigError(f"no overlay file at {overlay}")
        cfg = merge(cfg, yaml.safe_load(overlay.read_text()) or {}, f"{overlay.name}")
    for text in overrides or []:
        key_path, value = parse_override(text)
        cfg = merge(cfg, _nest(key_path, value), f"{path.name}[{profile}] override")
    check_choices(cfg, {**CHOICES, **(raw.get("choices") or {})}, f"{path.name}[{profile}]")
    cfg["profile"] = profile
    return Config.wrap(cfg)


def check_choices(cfg: Mapping, choices: Mapping[str, Any], where: str) -> None:
    """Refuse a value outside its key's closed set (keys absent from `cfg` are skipped; None passes)."""
    for key, allowed in choices.items():
        node: Any = cfg
        for part in key.split("."):
            if not isinstance(node, Mapping) or part not in node:
                break
            node = node[part]
        else:
            if node is not None and node not in list(allowed):
                raise ConfigError(f"{where}: {key}={node!r} is not one of {list(allowed)}")


def config_hash(cfg: Mapping) -> str:
    """A short, stable hash of a config (sorted-key JSON), recorded in provenance."""
    blob = json.dumps(cfg, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
