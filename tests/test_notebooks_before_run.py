"""Every notebook (each paper's and notebooks/*) executed against an empty results folder stops at its
first code cell after the parameters with one line that says what to run first, not a traceback."""
from __future__ import annotations

import json
from pathlib import Path

import papermill
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(ROOT.glob("papers/*/*.ipynb")) + sorted(ROOT.glob("notebooks/*.ipynb"))


def parameters(nb: Path) -> list[str]:
    cells = json.loads(nb.read_text())["cells"]
    cell = next(c for c in cells if "parameters" in c.get("metadata", {}).get("tags", []))
    return [line.split("=")[0].strip() for line in "".join(cell["source"]).splitlines()
            if "=" in line and not line.startswith("#")]


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_before_a_run_says_what_to_run(nb, tmp_path):
    results = tmp_path / "results" / "tiny" / ("" if nb.stem == "overview" else nb.stem)
    results.mkdir(parents=True)
    params = {"profile": "tiny", "results_dir": str(results)}
    if "interactive" in parameters(nb):
        params["interactive"] = False
    out = tmp_path / "out.ipynb"
    with pytest.raises(papermill.PapermillExecutionError) as err:
        papermill.execute_notebook(str(nb), str(out), parameters=params, kernel_name="python3",
                                   cwd=str(nb.parent), progress_bar=False, execution_timeout=120)
    assert err.value.ename == "NotRunYet", f"{nb.name}: stopped by {err.value.ename}: {err.value.evalue}"
    cells = [c for c in json.loads(out.read_text())["cells"] if c["cell_type"] == "code"]
    errors = [(i, o) for i, c in enumerate(cells) for o in c["outputs"] if o["output_type"] == "error"]
    assert len(errors) == 1
    index, error = errors[0]
    tags = [c["metadata"].get("tags", []) for c in cells[:index]]
    assert all("parameters" in t or "injected-parameters" in t for t in tags), \
        f"{nb.name}: cells ran before the check: {[''.join(c['source'])[:60] for c in cells[:index]]}"
    assert len(error["traceback"]) == 1, f"{nb.name}: a traceback, not one line: {error['traceback']}"
    line = error["traceback"][0]
    assert "make reproduce" in line and "snakemake --cores" in line and str(results) in line, line
