"""What a finished workflow says: the verdicts per paper (paper claims first, floors, gates and
accounting apart) and where to read them. Printed by the Snakefile's success handler;
`python -m shared.run_ending RESULTS_DIR` prints the same for an earlier run."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

from .claims_report import summary_line


def ending(results: str | Path, record: str | Path | None = None) -> str | None:
    """The closing lines for the run under `results` (a profile's folder, e.g. results/tiny), or None
    when it has no ledger (a partial target); `record`: the run's record folder (shared/record.py)."""
    results = Path(results)
    ledger = results / "claims.json"
    if not ledger.is_file():
        return None
    data = json.loads(ledger.read_text())
    rows = [SimpleNamespace(paper=c["paper"], kind=c.get("kind", "paper"), status=c["status"]) for c in data["claims"]]
    papers = sorted({r.paper for r in rows})
    width = max(map(len, papers), default=0)
    lines = [f"Verdicts at profile {data.get('profile', results.name)} (paper claims decide; the rest are checks):"]
    lines += [f"  {p:<{width}}  {summary_line([r for r in rows if r.paper == p])}" for p in papers]
    lines.append(f"Ledger: {results / 'claims.md'} (and claims.png, the forest plot)")
    if record is not None and (Path(record) / "record.json").is_file():
        lines.append(f"Record: {Path(record) / 'record.json'} (README tables: python tools/readme_tables.py)")
    report = results / "report.html"
    if report.is_file():
        lines.append(f"Report: {report}")
    return "\n".join(lines)


if __name__ == "__main__":
    text = ending(sys.argv[1] if len(sys.argv) > 1 else "results/tiny")
    print(text or "no ledger there yet: run `make reproduce` (or snakemake) first")
