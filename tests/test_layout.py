"""The repo's shape: required files, import rules, pins mirrored in environment.yml."""
import ast
import tomllib

import yaml

from conftest import REPO

TOP = ["Snakefile", "environment.yml", "README.md", "pyproject.toml", "Makefile", ".ci/run",
       "papers", "shared", "kernels", "notebooks", "tests", "profiles/default", "profiles/slurm",
       "LICENSE", "CITATION.cff"]


def test_top_level_layout():
    missing = [p for p in TOP if not (REPO / p).exists()]
    assert not missing, missing


def test_citation_names_the_five_papers():
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["license"] == tomllib.loads(
        (REPO / "pyproject.toml").read_text())["project"]["license"]
    assert len(cff["references"]) == len(list(REPO.glob("papers/*/rules.smk"))) == 5
    assert all(r["year"] == 2024 and r["authors"] for r in cff["references"])


def imports_of(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def test_import_rules():
    """shared and kernels never import a paper; papers never import each other."""
    bad = []
    for pkg in ("shared", "kernels"):
        for f in (REPO / pkg).rglob("*.py"):
            bad += [f"{f}: {m}" for m in imports_of(f) if m.split(".")[0] == "papers"]
    for paper in (REPO / "papers").iterdir():
        for f in paper.rglob("*.py"):
            bad += [f"{f}: {m}" for m in imports_of(f)
                    if m.startswith("papers.") and m.split(".")[1] != paper.name]
    assert not bad, bad


def test_environment_mirrors_pyproject_pins():
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert set(deps) <= set(pip), set(deps) - set(pip)
    assert "torch==2.13.0" in deps


def test_notebooks_committed_stripped_with_metadata():
    import nbformat

    for nb_path in [*REPO.glob("papers/*/*.ipynb"), *REPO.glob("notebooks/*.ipynb"),
                    *REPO.glob("tests/fixtures/papers/*/*.ipynb")]:
        nb = nbformat.read(nb_path, as_version=4)
        assert nb.metadata["language_info"]["name"] == "python", nb_path
        assert any("parameters" in c.metadata.get("tags", []) for c in nb.cells), f"{nb_path}: no parameters cell"
        assert any("NBVAL_CHECK_OUTPUT" in c.source for c in nb.cells), f"{nb_path}: no checked claims cell"
        assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"), f"{nb_path} has outputs"


def test_slurm_profile_names_existing_rules():
    import re

    rules = set()
    for f in [REPO / "Snakefile", REPO / "kernels/rules.smk", *REPO.glob("papers/*/rules.smk")]:
        rules |= set(re.findall(r"^\s*rule (\w+)", f.read_text(), re.M))   # also rules defined per profile
    profile = yaml.safe_load((REPO / "profiles/slurm/config.v8+.yaml").read_text())
    assert profile["executor"] == "slurm"
    unknown = set(profile["set-resources"]) - rules
    assert not unknown, f"slurm profile names rules that do not exist: {unknown}"


def test_every_papermill_run_has_a_timeout_and_no_widgets():
    """Papermill runs go through the Snakefile's PAPERMILL (per-cell timeout); paper notebooks pass
    interactive=False; each paper notebook has an `interactive` parameter and its widget cell tagged."""
    import re

    import nbformat

    for f in [REPO / "Snakefile", REPO / "kernels/rules.smk", *REPO.glob("papers/*/rules.smk")]:
        text = f.read_text()
        assert "-m papermill" not in text.replace('{PY} -m papermill --execution-timeout {NB_TIMEOUT}', ""), \
            f"{f}: papermill called without {{PAPERMILL}} (no per-cell timeout)"
    rule = re.search(r"rule paper_notebook:.*?shell:(.*?)\n\n", (REPO / "Snakefile").read_text(), re.S).group(1)
    assert "-p interactive False" in rule
    for nb_path in [*REPO.glob("papers/*/*.ipynb"), *REPO.glob("notebooks/*.ipynb")]:
        nb = nbformat.read(nb_path, as_version=4)
        widget_cells = [c for c in nb.cells if c.cell_type == "code" and "ipywidgets" in c.source]
        if nb_path.parts[-3] == "papers" or widget_cells:
            par = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
            assert re.search(r"^interactive = True", par.source, re.M), f"{nb_path}: no `interactive = True` parameter"
        for c in widget_cells:
            assert "explorer" in c.metadata.get("tags", []), f"{nb_path} {c.get('id')}: widget cell not tagged explorer"
            assert "if interactive" in c.source, f"{nb_path} {c.get('id')}: widgets built without `if interactive`"
