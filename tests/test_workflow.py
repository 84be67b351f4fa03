"""The workflow end to end at the smoke profile: snakemake, papermill, provenance, ledger, nbval.

Two runs: the fixture paper under tests/fixtures (checks the machinery itself), and every real
paper under papers/ (what `make smoke` runs). Each is followed by nbval (--nbval-lax) over the
executed notebooks and a dry run that must find nothing to do.
"""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURE_PAPERS, REPO, snakemake
from conftest import WORKFLOW_ENV as ENV

pytestmark = pytest.mark.workflow
NBVAL_CELL_TIMEOUT = 300   # nbval re-runs every cell: a hung one fails instead of waiting forever


def nbval(notebooks: list[Path]):
    return subprocess.run([sys.executable, "-m", "pytest", "--nbval-lax", "-q", "-p", "no:cacheprovider",
                           f"--nbval-cell-timeout={NBVAL_CELL_TIMEOUT}",
                           *map(str, notebooks)], cwd=REPO, env=ENV, capture_output=True, text=True)


def check_run(results: Path, papers: list[str]):
    smoke = results / "smoke"
    notebooks = [smoke / p / f"{p}.ipynb" for p in papers] + [smoke / "overview.ipynb"]
    for nb in notebooks:
        assert nb.is_file(), f"missing executed notebook {nb}"
    ledger = json.loads((smoke / "claims.json").read_text())
    assert ledger["profile"] == "smoke"
    assert (smoke / "claims.png").is_file() and (smoke / "claims.png.provenance.json").is_file()
    for paper in papers:
        artifacts = [smoke / paper / "metrics.json", *(smoke / paper).glob("figures/*.png"),
                     *(smoke / paper).glob("tables/*.md"), *(smoke / paper).glob("metrics/*.json")]
        for art in artifacts:
            if art.name.endswith(".provenance.json"):
                continue
            side = art.with_name(art.name + ".provenance.json")
            assert side.is_file(), f"no provenance sidecar for {art}"
            rec = json.loads(side.read_text())
            assert rec["profile"] == "smoke" and rec["rule"], rec
    # the run's record, beside the results of a run into another folder than the default
    record = json.loads((results / "record/smoke/record.json").read_text())
    assert record["profile"] == "smoke" and "verdicts" in record["tables"]
    assert {f"{p}.claims" for p in papers} <= set(record["tables"])
    checked = nbval(notebooks)
    assert checked.returncode == 0, checked.stdout[-3000:]
    again = snakemake(results, dry=True, papers_dir=None if papers != ["toy"] else FIXTURE_PAPERS)
    assert "Nothing to be done" in again.stdout + again.stderr, again.stdout[-2000:]


def test_fixture_paper_workflow(tmp_path):
    run = snakemake(tmp_path, papers_dir=FIXTURE_PAPERS)
    assert run.returncode == 0, run.stderr[-3000:]
    check_run(tmp_path, ["toy"])
    claims = json.loads((tmp_path / "smoke/claims.json").read_text())["claims"]
    statuses = [c["status"] for c in claims if c["paper"] == "toy"]
    assert statuses == ["PASS", "FAIL", "INCONCLUSIVE", "NOT RUN", "NOT RUN"]
    # the run ends with its verdicts and where to read them
    log = run.stdout + run.stderr
    assert "Verdicts at profile smoke" in log, log[-2000:]
    assert re.search(r"^  toy +paper claims 1 PASS · 1 FAIL · 0 INCONCLUSIVE; floors 0/1 PASS, 1 INCONCLUSIVE", log, re.M), log[log.index("Verdicts"):][:800]
    assert f"Ledger: {tmp_path / 'smoke/claims.md'}" in log
    assert f"Record: {tmp_path / 'record/smoke/record.json'}" in log
    # an nbval re-run that gives different numbers must fail: tamper with the metrics under the notebook
    metrics = tmp_path / "smoke/toy/metrics.json"
    data = json.loads(metrics.read_text())
    data["fit"]["slope"]["values"] = [3.0] * len(data["fit"]["slope"]["values"])
    metrics.write_text(json.dumps(data))
    assert nbval([tmp_path / "smoke/toy/toy.ipynb"]).returncode != 0


def test_smoke_workflow_every_paper(smoke_every_paper):
    tmp_path, run = smoke_every_paper
    papers = sorted(p.parent.name for p in (REPO / "papers").glob("*/rules.smk"))
    assert run.returncode == 0, run.stderr[-5000:]
    check_run(tmp_path, papers)
    # No shipped claim may be unfalsifiable on the smoke metrics (python -m shared.claims --audit).
    claim_files = [str(p) for p in [*sorted((REPO / "papers").glob("*/claims.yaml")), REPO / "kernels/claims.yaml"]]
    audit = subprocess.run([sys.executable, "-m", "shared.claims", "--audit", "--profile", "smoke",
                            "--results", str(tmp_path / "smoke"), *claim_files],
                           cwd=REPO, env=ENV, capture_output=True, text=True)
    assert audit.returncode == 0, audit.stdout[-3000:] + audit.stderr[-2000:]


def test_cli_refuses_bad_profile_and_key(tmp_path):
    env = {**ENV, "PYTHONPATH": str(FIXTURE_PAPERS)}
    bad = subprocess.run([sys.executable, "-m", "toy", "fit", "--profile", "huge", "--out", str(tmp_path)],
                         env=env, capture_output=True, text=True)
    assert bad.returncode != 0 and "unknown profile 'huge'" in bad.stderr and "tiny" in bad.stderr
    bad = subprocess.run([sys.executable, "-m", "toy", "fit", "--profile", "smoke", "--out", str(tmp_path),
                          "--set", "data.size=3"], env=env, capture_output=True, text=True)
    assert bad.returncode != 0 and "unknown key" in bad.stderr and "valid keys here" in bad.stderr


def test_unknown_profile_stops_snakemake(tmp_path):
    run = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--config", "profile=huge",
                          f"results={tmp_path}"], cwd=REPO, env=ENV, capture_output=True, text=True)
    assert run.returncode != 0 and "valid profiles" in run.stdout + run.stderr
