"""Fill the README tables from the results record (shared/record.py): every block between

    <!-- record:PROFILE/NAME -->
    ...
    <!-- /record:PROFILE/NAME -->

in README.md and papers/*/README.md gets table NAME of record/PROFILE/record.json, so no README number
is typed by hand. `--check` changes nothing and exits 1 naming each block that differs from the record
(tests/test_record.py runs it).

    python tools/readme_tables.py [--check] [--record-root record] [FILE ...]
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"(<!-- record:(?P<name>[\w.-]+/[\w.-]+) -->\n)(?P<body>.*?)(<!-- /record:(?P=name) -->)", re.S)


def readmes(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted(root.glob("papers/*/README.md"))]


def fill(text: str, record_root: Path) -> tuple[str, list[str]]:
    """`text` with every record block filled; and the problems (a name the record lacks)."""
    problems, records = [], {}

    def table(m: re.Match) -> str:
        profile, name = m.group("name").split("/", 1)
        if profile not in records:
            path = record_root / profile / "record.json"
            records[profile] = json.loads(path.read_text())["tables"] if path.is_file() else None
        tables = records[profile]
        if tables is None or name not in tables:
            problems.append(f"{m.group('name')}: not in {record_root / profile / 'record.json'}")
            return m.group(0)
        return f"{m.group(1)}{tables[name].strip()}\n{m.group(4)}"

    return BLOCK.sub(table, text), problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=Path, help="default: README.md and papers/*/README.md")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 when a table differs")
    ap.add_argument("--record-root", type=Path, default=ROOT / "record")
    args = ap.parse_args(argv)
    bad = []
    for path in args.files or readmes():
        text = path.read_text()
        new, problems = fill(text, args.record_root)
        bad += [f"{path}: {p}" for p in problems]
        if new != text:
            if args.check:
                old_blocks = {m.group("name"): m.group(0) for m in BLOCK.finditer(text)}
                bad += [f"{path}: table {m.group('name')} differs from the record (run tools/readme_tables.py)"
                        for m in BLOCK.finditer(new) if old_blocks.get(m.group("name")) != m.group(0)]
            else:
                path.write_text(new)
                print(f"filled {path}")
    for line in bad:
        print(line, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
