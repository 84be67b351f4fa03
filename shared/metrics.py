"""Merge an experiment's metric files into the paper's `metrics.json` (keyed by experiment).

`python -m shared.metrics OUT part1.json part2.json ... [--profile P --rule R]`
"""
from __future__ import annotations

import argparse
from pathlib import Path

from .io import read_json, write_json
from .provenance import write_sidecar


def merge_metrics(parts: list[Path]) -> dict:
    """{stem of each part: its content}; two parts with one stem is an error."""
    merged: dict = {}
    for part in parts:
        key = Path(part).stem
        if key in merged:
            raise ValueError(f"two metric files named {key!r}: {parts}")
        merged[key] = read_json(part)
    return merged


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("parts", nargs="+", type=Path)
    parser.add_argument("--profile", required=True)
    parser.add_argument("--rule", default=None)
    args = parser.parse_args(argv)
    write_json(args.out, merge_metrics(args.parts))
    write_sidecar(args.out, profile=args.profile, rule=args.rule,
                  extra={"inputs": [str(p) for p in args.parts]})


if __name__ == "__main__":
    main()
