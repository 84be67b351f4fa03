"""Two records' verdicts side by side (`python -m shared.claims --compare A B`).

A and B are each a results record (`record/<profile>/record.json`, or its folder) or a ledger
(`results/<profile>/claims.json`, or its folder). It lists every claim whose verdict differs between
them, with each side's estimate and interval, then the claims found in one only; a claim whose
verdict is the same is not listed, however far its number moved. Exit 0 whatever it finds: it
reports, it does not judge (two machines may differ where the README says they may).
"""
from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Mapping

from .io import read_json

LIST_AT_MOST = 10   # claims found in one record only, listed by id up to this many


def load_verdicts(path: Path) -> dict[str, dict]:
    """{claim id: its row} of a record or a ledger (a file, or the folder that holds one)."""
    path = Path(path)
    if path.is_dir():
        found = [path / name for name in ("record.json", "claims.json") if (path / name).is_file()]
        if not found:
            raise SystemExit(f"no record.json or claims.json in {path}")
        path = found[0]
    if not path.is_file():
        raise SystemExit(f"no such record: {path}")
    return {row["id"]: row for row in read_json(path)["claims"]}


def _shown(row: Mapping) -> str:
    est, lo, hi = row.get("reproduced"), row.get("lo"), row.get("hi")
    if est is None:
        return "—"
    text = f"{est:.4g}"
    if lo is not None and hi is not None:
        text += f" [{lo:.4g}, {hi:.4g}]"
    return text + (f" n={row['n']}" if row.get("n") else "")


def differing(a: Mapping[str, Mapping], b: Mapping[str, Mapping]) -> list[tuple[str, Mapping, Mapping]]:
    """(id, row in A, row in B) of every claim in both whose status differs, in A's order."""
    return [(cid, a[cid], b[cid]) for cid in a if cid in b and a[cid]["status"] != b[cid]["status"]]


def report(a: Mapping[str, Mapping], b: Mapping[str, Mapping], name_a: str = "A", name_b: str = "B") -> str:
    moved = differing(a, b)
    lines = [f"{len(moved)} of {len(set(a) & set(b))} claims in both change verdict ({name_a} → {name_b})"]
    lines += [f"  {cid}: {ra['status']} → {rb['status']}   {_shown(ra)} → {_shown(rb)}" for cid, ra, rb in moved]
    for only, name in ((sorted(set(a) - set(b)), name_a), (sorted(set(b) - set(a)), name_b)):
        if len(only) > LIST_AT_MOST:   # a record of other papers: counted per paper, not listed
            per_paper = Counter(cid.split(".")[0] for cid in only)
            lines.append(f"{len(only)} only in {name}: " + ", ".join(f"{p} {k}" for p, k in sorted(per_paper.items())))
        elif only:
            lines.append(f"{len(only)} only in {name}: {', '.join(only)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.claims --compare",
                                     description="The claims whose verdict differs between two records.")
    parser.add_argument("a", type=Path, help="record.json or claims.json (or its folder)")
    parser.add_argument("b", type=Path, help="the other one")
    args = parser.parse_args(argv)
    print(report(load_verdicts(args.a), load_verdicts(args.b), str(args.a), str(args.b)))
    return 0
