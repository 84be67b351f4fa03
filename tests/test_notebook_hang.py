"""Notebooks cannot hang: each paper's explorer cell runs REPEATS times in a row under papermill, in the
workflow's mode (interactive=False, no widgets) and under a per-cell timeout; and a kernel that stops
answering fails the run within that timeout, with an error that names the cell."""
import os
import re
import subprocess
import sys
import time

import nbformat
import papermill
import pytest

from conftest import REPO, WORKFLOW_ENV

REPEATS = 10
CELL_TIMEOUT = 120          # seconds per cell; the slowest explorer cell takes ~14 s at tiny, less at smoke
PAPERS = sorted(p.parent.name for p in (REPO / "papers").glob("*/rules.smk"))


def explorer_index(nb) -> int:
    """Index of the cell tagged `explorer` (the widget explorer of a paper notebook)."""
    found = [i for i, c in enumerate(nb.cells) if "explorer" in c.metadata.get("tags", [])]
    assert len(found) == 1, f"expected one cell tagged 'explorer', found {len(found)}"
    return found[0]


def explorer_slice(nb_path, repeats: int = REPEATS):
    """The notebook's code cells up to its explorer cell, then the explorer cell `repeats` times, each
    labelled with its run number so a timeout's error (which quotes the cell) says which run hung."""
    nb = nbformat.read(nb_path, as_version=4)
    i = explorer_index(nb)
    cell = nb.cells[i]
    label = f"{nb_path.relative_to(REPO)} cell {cell.get('id')}"
    runs = [nbformat.v4.new_code_cell(f"# explorer run {k + 1}/{repeats}: {label}\n{cell.source}")
            for k in range(repeats)]
    nb.cells = [c for c in nb.cells[:i] if c.cell_type == "code"] + runs
    return nb, label


@pytest.mark.workflow
@pytest.mark.parametrize("paper", PAPERS)
def test_explorer_cell_runs_repeatedly_without_hang(paper, smoke_every_paper, tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")   # the kernel's own default
    root, run = smoke_every_paper
    results = root / "smoke" / paper
    assert (results / "metrics.json").is_file(), f"no smoke results for {paper}:\n{run.stderr[-3000:]}"
    nb, label = explorer_slice(REPO / "papers" / paper / f"{paper}.ipynb")
    out = tmp_path / f"{paper}_explorer.ipynb"
    params = {"profile": "smoke", "results_dir": str(results), "claims_path": str(REPO / "papers" / paper / "claims.yaml"),
              "interactive": False}
    start = time.monotonic()
    try:
        papermill.execute_notebook(nb, str(out), parameters=params, kernel_name="python3", cwd=str(results),
                                   execution_timeout=CELL_TIMEOUT, progress_bar=False)
    except Exception as exc:   # a timeout (CellTimeoutError) or a cell error: name the cell and the run
        which = re.search(r"explorer run \d+/\d+", f"{getattr(exc, 'source', '')}\n{exc}")
        pytest.fail(f"{label}: {which.group(0) if which else 'a cell before the explorer'} did not finish "
                    f"(per-cell timeout {CELL_TIMEOUT} s) after {time.monotonic() - start:.0f} s: "
                    f"{type(exc).__name__}: {str(exc)[:1500]}")
    done = nbformat.read(out, as_version=4)
    ran = [c for c in done.cells if c.source.startswith("# explorer run ")]
    assert len(ran) == REPEATS and all(c.execution_count for c in ran), label
    assert all(c.outputs for c in ran), f"{label}: a run rendered nothing"
    assert not any(o.get("data", {}).get("application/vnd.jupyter.widget-view+json")
                   for c in ran for o in c.outputs), f"{label}: widgets built with interactive=False"


def test_silent_kernel_fails_within_the_timeout_naming_the_cell(tmp_path):
    """The workflow's papermill command (Snakefile PAPERMILL) on a kernel that stops answering mid-cell,
    as the hung widget cell did: it must fail within the timeout, quoting the cell, not wait forever."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    par = nbformat.v4.new_code_cell("# parameters\ninteractive = True")
    par.metadata["tags"] = ["parameters"]
    nb.cells = [par, nbformat.v4.new_code_cell("x = 1"),
                nbformat.v4.new_code_cell("# the silent cell\nimport os, signal\nos.kill(os.getpid(), signal.SIGSTOP)")]
    src, out = tmp_path / "silent.ipynb", tmp_path / "silent_out.ipynb"
    nbformat.write(nb, src)
    snakefile = (REPO / "Snakefile").read_text()
    assert re.search(r'PAPERMILL = f".*-m papermill --execution-timeout \{NB_TIMEOUT\}', snakefile)
    timeout = 5
    start = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "papermill", "--execution-timeout", str(timeout), "-k", "python3",
                          str(src), str(out), "-p", "interactive", "False"],
                         env=WORKFLOW_ENV, capture_output=True, text=True, timeout=120)
    elapsed = time.monotonic() - start
    assert run.returncode != 0
    assert "Cell execution timed out" in run.stderr and "the silent cell" in run.stderr, run.stderr[-2000:]
    assert elapsed < timeout + 60, f"took {elapsed:.0f} s for a {timeout} s timeout"
    assert os.path.exists(out)
