"""Provenance sidecars: `<file>.provenance.json` next to every figure, table and metrics file.

A sidecar holds the git commit and dirty flag, profile, config hash, seed, package versions,
device, wall time and the rule or command that made the file.

Command line, for files made outside Python (e.g. a papermill-executed notebook)::

    python -m shared.provenance FILE --profile tiny --rule mmp_notebook [--seed 0] [--wall-time 12.3]
"""
from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import os
import platform
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from . import cpu_isa
from .io import write_json

PACKAGES = ("torch", "triton", "diffusers", "lightning", "numpy", "snakemake", "POT", "scikit-survival")
SUFFIX = ".provenance.json"


def sidecar_path(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(path.name + SUFFIX)


@lru_cache(maxsize=1)
def git_state() -> dict[str, Any]:
    """Commit and dirty flag of the repo this package lives in (None outside a git checkout)."""
    root = Path(__file__).resolve().parents[1]

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def device_info() -> dict[str, Any]:
    info: dict[str, Any] = {"host": platform.node(), "platform": platform.platform(), "python": platform.python_version()}
    info["cpu_isa"] = cpu_isa.in_effect()
    torch = sys.modules.get("torch")
    if torch is not None:
        info["torch_threads"] = torch.get_num_threads()
        info["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        if torch.cuda.is_available():
            info["device"] = torch.cuda.get_device_name(0)
        else:
            info["device"] = "cpu"
    else:
        info["device"] = "cpu (torch not imported)"
    return info


def _process_age() -> float | None:
    """Seconds since this process was created (forked), from /proc; None where there is none."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])   # field 22, starttime
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
    except (OSError, IndexError, ValueError):
        return None
    return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))


def process_usage() -> dict[str, Any]:
    """This process's own cost so far: wall seconds since it was created (a warm-started job: since its
    fork from the warm server, so the imports it skipped are not counted), CPU seconds of it and of
    its waited-for children (user + system), its peak resident memory, and whether it was warm."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    age = _process_age()
    return {"pid": os.getpid(), "wall_s": None if age is None else round(age, 3),
            "cpu_s": round(own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime, 3),
            "max_rss_mib": round(max(own.ru_maxrss, children.ru_maxrss) / 1024, 1),
            "warm": os.environ.get("REPRO_WARM_JOB") == "1"}


def record(
    *,
    profile: str | None,
    config_hash: str | None = None,
    seed: int | None = None,
    rule: str | None = None,
    wall_time_s: float | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The provenance record of one artifact."""
    return {
        "git": git_state(),
        "profile": profile,
        "config_hash": config_hash,
        "seed": seed,
        "packages": package_versions(),
        "device": device_info(),
        "wall_time_s": None if wall_time_s is None else round(float(wall_time_s), 3),
        "rule": rule,
        "command": " ".join(sys.argv),
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        **(extra or {}),
    }


def write_sidecar(path: str | Path, **fields: Any) -> Path:
    """Write `<path>.provenance.json` for the artifact at `path` (which must exist)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"cannot stamp provenance: no artifact at {path}")
    return write_json(sidecar_path(path), record(**fields))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--profile", required=True)
    parser.add_argument("--rule", default=None)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--config-hash", default=None)
    parser.add_argument("--wall-time", type=float, default=None)
    args = parser.parse_args(argv)
    for f in args.files:
        write_sidecar(f, profile=args.profile, rule=args.rule, seed=args.seed,
                      config_hash=args.config_hash, wall_time_s=args.wall_time)


if __name__ == "__main__":
    main()
