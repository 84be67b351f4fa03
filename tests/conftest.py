"""Test-wide settings: one torch thread, the Triton interpreter where there is no GPU, offline hubs, no wandb,
the CPU kernels pinned to one instruction set (shared/cpu_isa.py).

TRITON_INTERPRET must be set before any `@triton.jit` decorator runs, hence here, at import time (and
without importing torch, so a device node stands for CUDA). On a CUDA machine the kernels compile
(kernels/gpu_check.sh unsets it); an explicit TRITON_INTERPRET in the environment always wins.
"""
import glob
import os

if "TRITON_INTERPRET" not in os.environ:
    os.environ["TRITON_INTERPRET"] = "0" if glob.glob("/dev/nvidia[0-9]*") else "1"
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("MPLBACKEND", "Agg")
# one instruction set for every CPU kernel, as at smoke and tiny (a value already set wins)
from shared import cpu_isa  # noqa: E402

cpu_isa.pin()

import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[1]
FIXTURE_PAPERS = REPO / "tests" / "fixtures" / "papers"


@pytest.fixture
def repo() -> Path:
    return REPO


# The workflow runs as users run it: no Triton interpreter or Agg backend forced, one thread per job,
# this venv first.
WORKFLOW_ENV = {**{k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "MPLBACKEND")}, "OMP_NUM_THREADS": "1",
                "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}


def snakemake(results: Path, *extra: str, papers_dir: Path | None = None, dry: bool = False):
    """`snakemake --config profile=smoke results=...` from the repo root (a dry run with dry=True), with
    warm starts (shared/warm.py): the kill tests check that its results equal cold processes' results."""
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "--nolock", "--config", "profile=smoke", "warm=1",
           f"results={results}", *([f"papers_dir={papers_dir}"] if papers_dir else []), *extra]
    if dry:
        cmd.append("-n")
    return subprocess.run(cmd, cwd=REPO, env=WORKFLOW_ENV, capture_output=True, text=True)


@pytest.fixture(scope="session")
def smoke_every_paper(tmp_path_factory, request):
    """(results root, CompletedProcess) of one smoke run of every real paper, shared by the tests that
    need smoke results. REPRO_SMOKE_RESULTS=<dir> keeps them there (CI: results, for make test-browser).

    Under pytest-xdist (`make test` runs two workers) the first worker to ask runs it while holding a
    file lock and leaves its outcome, stamped with this test run's id, beside the results; the other
    worker waits on the lock and reads that outcome (both files in the results root). (The run takes both cores, so the wait costs
    nothing; xdist's loadgroup cannot pin the tests to one worker under pytest 9.)"""
    import fcntl
    import json

    keep = os.environ.get("REPRO_SMOKE_RESULTS")
    workerinput = getattr(request.config, "workerinput", None)
    if workerinput is None:   # one process: no one to share with
        results = Path(keep).resolve() if keep else tmp_path_factory.mktemp("smoke_every_paper")
        return results, snakemake(results)
    results = Path(keep).resolve() if keep else tmp_path_factory.getbasetemp().parent / "smoke_every_paper"
    results.mkdir(parents=True, exist_ok=True)
    outcome = results / ".smoke_every_paper.outcome.json"
    with open(results / ".smoke_every_paper.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            done = json.loads(outcome.read_text()) if outcome.exists() else {}
            if done.get("testrunuid") != workerinput["testrunuid"]:
                proc = snakemake(results)
                done = {"testrunuid": workerinput["testrunuid"], "args": proc.args, "returncode": proc.returncode,
                        "stdout": proc.stdout, "stderr": proc.stderr}
                outcome.write_text(json.dumps(done))
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return results, subprocess.CompletedProcess(done["args"], done["returncode"], done["stdout"], done["stderr"])


@pytest.fixture(autouse=True)
def kernels_reference_outside_kernel_tests(request, monkeypatch):
    """Outside tests/kernels, a kernel call on CPU tensors runs its torch reference, as the workflow's
    CPU jobs do, not the test-wide Triton interpreter (minutes per trained arm): the kernels' own tests
    hold each kernel to its reference. A test marked `interpreter` keeps the interpreter."""
    kernel_test = request.node.path.is_relative_to(REPO / "tests" / "kernels")
    if os.environ.get("TRITON_INTERPRET") == "1" and not kernel_test and not request.node.get_closest_marker("interpreter"):
        monkeypatch.setenv("KERNELS_FORCE_REFERENCE", "1")


# started first, they overlap the rest: SLURM's tests mostly wait on its controller, the rehearsal is long
FIRST = ("tests/test_slurm.py", "tests/test_rehearsal.py")


def pytest_collection_modifyitems(config, items):
    """The slow tests that hardly use a core run first (a stable sort), so that under `make test`'s two
    workers their wall time overlaps the others instead of ending the run alone."""
    items.sort(key=lambda item: not item.nodeid.startswith(FIRST))


def headless_chromium(window_size: str, *extra_args: str):
    """A headless Chromium WebDriver for the browser tests; stops the test in one line without chromium."""
    import shutil
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (binary and chromedriver):
        pytest.fail("chromium / chromedriver missing: `make test-browser` installs Debian's chromium-driver")
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={window_size}",
                "--disable-gpu", *extra_args):
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service(chromedriver), options=opts)
