"""Full-profile inputs (weights, datasets) come from local paths; a missing one stops with one
message that names what to fetch and where to put it. Nothing is downloaded at run time."""
from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


class MissingAssetError(FileNotFoundError):
    """A weights file or dataset the full profile needs is not on disk."""


def require_path(path: str | Path | None, *, what: str, fetch: str, config_key: str) -> Path:
    """Return `path` if it exists; otherwise raise one actionable message.

    what: e.g. "Stable Diffusion v1.5 weights"; fetch: where to get them;
    config_key: the config key that points at them (e.g. "p2l.full.sd_path").
    """
    if path is None or str(path) == "":
        raise MissingAssetError(
            f"No path set for {what}: fetch {fetch} and set `{config_key}` to its local path "
            f"(config.yaml or --set {config_key}=...)."
        )
    path = Path(os.path.expanduser(str(path)))
    if not path.exists():
        raise MissingAssetError(
            f"No {what} at {path}: fetch {fetch}, put it at {path} or point `{config_key}` at it."
        )
    return path
