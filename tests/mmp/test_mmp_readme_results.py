"""The README's results block is written from a run's files: a job's CPU is its process's last
provenance record (one process may write several outputs), the notebook's and the merge's from their
benchmarks; the ledger rows are the paper's tiny claims with their verdicts."""
import json

from papers.mmp import readme_results


def write_prov(path, rule, cpu, pid):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_name(path.name + ".provenance.json").write_text(
        json.dumps({"rule": rule, "process": {"cpu_s": cpu, "wall_s": cpu + 1, "pid": pid}}))


def test_cpu_per_job_takes_each_process_once_and_the_benchmarks(tmp_path):
    root = tmp_path / "mmp"
    write_prov(root / "metrics" / "cindex_abmil.json", "mmp_cindex_arms", 10.0, 1)
    write_prov(root / "metrics" / "cindex_pathway.json", "mmp_cindex_arms", 25.0, 1)   # same process, later
    write_prov(root / "tables" / "cost.md", "mmp_cost_figure", 7.5, 2)
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "paper_notebook@mmp.tsv").write_text("s\tcpu_time\n3.0\t2.5\n")
    (text,) = readme_results.cpu_per_job(root)
    assert text.startswith("**35 CPU s (0.6 CPU-min) over 3 jobs**: `mmp_cindex_arms` 25.0 (26 s wall); ")
    assert "`paper_notebook@mmp` 2.5 (3 s wall)" in text


def test_ledger_lists_the_tiny_claims_with_verdicts(tmp_path):
    claims = [{"id": "mmp.a", "paper": "mmp", "profiles": ["tiny"], "kind": "paper", "metric": "x.y",
               "test": "> 0", "reproduced": 0.1, "lo": 0.05, "hi": 0.15, "n": 3, "unit": "cohort",
               "evidence": "sample", "status": "PASS", "knob": None},
              {"id": "mmp.b", "paper": "mmp", "profiles": ["full"], "kind": "paper", "metric": "x.z",
               "test": "> 0", "reproduced": None, "lo": None, "hi": None, "n": None, "unit": None,
               "evidence": "", "status": "NOT RUN", "knob": None}]
    summary = {"mmp": {"paper": {"PASS": 1, "FAIL": 0}}}
    (tmp_path / "claims.json").write_text(json.dumps({"claims": claims, "summary": summary}))
    rows = readme_results.ledger(tmp_path)
    assert rows[0] == "Ledger at this profile: paper 1 PASS."
    assert any(r.startswith("| `mmp.a` | paper |") and "0.1 [0.05, 0.15]" in r and "3 cohorts" in r
               and "**PASS**" in r for r in rows)
    assert not any("mmp.b" in r for r in rows)
