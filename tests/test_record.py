"""The results record (shared/record.py) and the README tables filled from it (tools/readme_tables.py):
a README table that differs from the record fails."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from shared.record import build, cost_table, write

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("readme_tables", ROOT / "tools" / "readme_tables.py")
readme_tables = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(readme_tables)


def claim(cid, paper, status, kind="paper", value=1.0, lo=0.5, hi=1.5):
    return {"id": f"{paper}.{cid}", "paper": paper, "kind": kind, "status": status, "reproduced": value,
            "lo": lo, "hi": hi, "n": 3, "unit": "seed", "test": "> 0", "paper_value": None}


def fake_run(root: Path) -> Path:
    results = root / "results" / "tiny"
    claims = [claim("a1", "alpha", "PASS"), claim("a2", "alpha", "FAIL", lo=-2.0, hi=-1.0),
              claim("floor", "alpha", "PASS", kind="floor"), claim("b1", "beta", "INCONCLUSIVE", lo=-1.0)]
    (results / "alpha" / "tables").mkdir(parents=True)
    (results / "alpha" / "metrics").mkdir()
    (results / "claims.json").write_text(json.dumps({"profile": "tiny", "claims": claims}))
    (results / "claims.json.provenance.json").write_text(json.dumps({"created": "2026-01-01T00:00:00+00:00"}))
    (results / "alpha" / "tables" / "main.md").write_text("| arm | score |\n|---|---|\n| ours | 1.0 [0.5, 1.5] |\n")
    (results / "alpha" / "metrics" / "fit.json.provenance.json").write_text(json.dumps(
        {"git": {"commit": "a" * 40, "dirty": False}, "device": {"device": "cpu"}, "rule": "alpha_fit",
         "command": "papers/alpha/__main__.py fit --profile tiny", "process": {"cpu_s": 12.0, "wall_s": 13.0,
                                                                              "pid": 7, "warm": True}}))
    return results


def test_record_of_a_run(tmp_path):
    record = build(fake_run(tmp_path), tables=[("alpha", "main")])
    assert record["profile"] == "tiny" and record["result_commits"] == ["a" * 12]
    assert record["machine"]["devices"] == ["cpu"] and record["machine"]["cores"]
    tables = record["tables"]
    assert set(tables) == {"verdicts", "run", "alpha.claims", "beta.claims", "alpha.paper_claims", "beta.paper_claims",
                           "alpha.main", "alpha.cost"}
    assert "| a2 | paper |" in tables["alpha.paper_claims"] and "| floor |" not in tables["alpha.paper_claims"]
    assert "| floor |" in tables["alpha.claims"]
    verdicts = tables["verdicts"].split("\n\n")
    assert verdicts[0].startswith("No primary claims are marked yet")
    rows = {line.split(" | ")[0].strip("| "): line for line in verdicts[1].splitlines()[2:]}
    assert rows["alpha"].startswith("| alpha | 1 | 1 | 0 | 0 | 0 | floors 1/1 | a1 | a2 |")
    assert rows["beta"].startswith("| beta | 0 | 0 | 1 | 0 | 0 | – | – | – |")
    assert verdicts[2].startswith("0 claims tested")          # rows of a ledger without p-values
    assert "| a2 | paper | 1 | [-2, -1] | 3 seeds | `> 0` | **FAIL** |" in tables["alpha.claims"]
    assert tables["alpha.main"].endswith("| ours | 1.0 [0.5, 1.5] |")
    assert record["papers"]["alpha"]["headline_tables"] == ["alpha.main"]
    assert record["papers"]["beta"]["headline_tables"] == ["beta.claims"]   # declared none: its claims
    out = tmp_path / "record" / "tiny"
    out.mkdir(parents=True)
    (out / "stale.md").write_text("a table of an earlier record")
    write(record, out)
    assert not (out / "stale.md").exists() and (out / "alpha.main.md").is_file()
    assert json.loads((out / "record.json").read_text())["tables"] == tables


def test_cost_per_job_from_the_jobs_own_processes(tmp_path):
    """A warm-started job's CPU is its own process's (provenance `process`), not its benchmark's (the client,
    which reads 0); two outputs of one process are one job; the workflow's notebook from its benchmark."""
    results = fake_run(tmp_path)
    (results / "alpha" / "tables" / "main.md.provenance.json").write_text(json.dumps(
        {"rule": "alpha_fit", "command": "papers/alpha/__main__.py fit", "process": {"cpu_s": 11.0, "wall_s": 12.0,
                                                                                    "pid": 7, "warm": True}}))
    (results / "alpha" / "benchmarks").mkdir()
    (results / "alpha" / "benchmarks" / "alpha_fit.tsv").write_text("s\tcpu_time\n13.1\t0.00\n")
    (results / "benchmarks").mkdir()
    (results / "benchmarks" / "paper_notebook@alpha.tsv").write_text("s\th:m:s\tcpu_time\n9.0\t0:00:09\t8.0\n")
    table = cost_table(results, "alpha").splitlines()
    assert table[2] == "| fit | `alpha_fit` | 12.0 | 13 | yes |"
    assert table[3] == "| notebook | `paper_notebook` | 8.0 | 9 | no |"
    assert table[4].startswith("| **all 2 jobs** |  | **20** (0.3 min) | 22 |")
    assert cost_table(results, "beta") is None


def test_a_readme_table_that_differs_from_the_record_fails(tmp_path):
    write(build(fake_run(tmp_path)), tmp_path / "record" / "tiny")
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\n<!-- record:tiny/verdicts -->\n<!-- /record:tiny/verdicts -->\nprose\n")
    args = ["--record-root", str(tmp_path / "record"), str(readme)]
    assert readme_tables.main(["--check", *args]) == 1   # empty block
    assert readme_tables.main(args) == 0 and readme_tables.main(["--check", *args]) == 0
    text = readme.read_text()
    assert "| alpha | 1 | 1 |" in text and text.endswith("<!-- /record:tiny/verdicts -->\nprose\n")
    readme.write_text(text.replace("| alpha | 1 | 1 |", "| alpha | 2 | 1 |"))   # a number typed by hand
    assert readme_tables.main(["--check", *args]) == 1
    readme.write_text(text.replace("tiny/verdicts", "tiny/nonesuch"))   # a name the record lacks
    assert readme_tables.main(["--check", *args]) == 1


def test_readme_tables_match_the_record(capsys):
    """Every record block in README.md and papers/*/README.md equals its table in record/<profile>/."""
    assert "<!-- record:tiny/verdicts -->" in (ROOT / "README.md").read_text()
    assert readme_tables.main(["--check"]) == 0, capsys.readouterr().err
