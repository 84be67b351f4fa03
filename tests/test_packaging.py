"""Packaging: requirements.lock pins every package with hashes, agrees with pyproject.toml, and is what
`make install` installs; the runtime dependencies hold no test or lab tool."""
from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements.lock"
EXTRAS = ("test", "lab", "cluster", "browser")
# tools that only the tests, JupyterLab or the browser checks need, never the workflow
NOT_RUNTIME = {"pytest", "pytest-xdist", "nbval", "jupyterlab", "ipywidgets", "selenium",
               "snakemake-executor-plugin-slurm"}


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_entries() -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) of every requirement in the lock."""
    text = re.sub(r"\\\n\s*", " ", LOCK.read_text())
    entries = {}
    for line in text.splitlines():
        line = line.split(" #")[0].strip()
        if not line or line.startswith(("#", "--")):
            continue
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)(.*)$", line)
        assert m, f"requirements.lock: not an exact pin: {line[:80]}"
        entries[norm(m.group(1))] = (m.group(2), re.findall(r"--hash=sha256:([0-9a-f]{64})", m.group(3)))
    return entries


def pins(requirements: list[str]) -> dict[str, str]:
    """name -> version of the exact pins among `requirements`."""
    out = {}
    for r in requirements:
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^;\s]+)", r)
        if m:
            out[norm(m.group(1))] = m.group(2)
    return out


@pytest.fixture(scope="module")
def project():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_every_locked_package_has_hashes():
    entries = lock_entries()
    assert len(entries) > 100, "requirements.lock holds the whole environment, not only the direct pins"
    missing = [n for n, (_, hashes) in entries.items() if not hashes]
    assert not missing, f"requirements.lock: packages without a hash: {missing}"
    assert not [n for n in entries if n.startswith("nvidia-")], "a CUDA build of torch in the lock"
    assert entries["torch"][0].endswith("+cpu"), "torch: the local CPU wheel"


def test_lock_agrees_with_pyproject(project):
    entries = lock_entries()
    wanted = pins(project["dependencies"])
    for extra in EXTRAS:
        wanted |= pins(project["optional-dependencies"][extra])
    for name, version in wanted.items():
        assert name in entries, f"{name} is in pyproject.toml but not in requirements.lock: run `make lock`"
        assert entries[name][0].split("+")[0] == version, (
            f"{name}: pyproject.toml pins {version}, requirements.lock {entries[name][0]}: run `make lock`")
    unpinned = [re.split(r"[<>=!~;\s\[]", r)[0] for r in project["dependencies"] if "==" not in r]
    assert all(norm(n) in entries for n in unpinned), unpinned


def test_runtime_dependencies_hold_no_test_or_lab_tools(project):
    runtime = {norm(re.split(r"[<>=!~;\s\[]", r)[0]) for r in project["dependencies"]}
    assert not runtime & NOT_RUNTIME, f"test or lab tools among the runtime dependencies: {runtime & NOT_RUNTIME}"
    assert set(EXTRAS) <= set(project["optional-dependencies"])


@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_make_installs_from_the_lock(installer, tmp_path):
    makefile = (ROOT / "Makefile").read_text()
    first = makefile.split("$(STAMP): ", 1)[1].splitlines()[0]
    assert "requirements.lock" in first, "the install reruns when the lock changes"
    recipe = subprocess.run(["make", "-n", "-B", "install", f"INSTALLER={installer}", f"VENV={tmp_path}/venv"],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert re.search(r"pip install .*--require-hashes --no-deps -r requirements\.lock", recipe), recipe
    # the project itself adds nothing the lock does not hold
    assert re.search(r"pip install .*--no-deps .*-e \.", recipe), recipe
    assert ("uv pip install" in recipe) == (installer == "uv"), recipe
    if installer == "uv":   # as pip does: else, with bytecode writing off, each import compiles it again
        assert all("--compile-bytecode" in line for line in recipe.splitlines() if "uv pip install" in line), recipe
