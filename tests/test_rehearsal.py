"""The full profile's rehearsal end to end on the CPU (`snakemake --config profile=full rehearsal=1`):
every paper's full-profile rules and notebooks on the stand-in assets that rule rehearsal_assets
writes, with no network. Every artifact must exist with its provenance sidecar, and nothing may be
downloaded: HF_HUB_OFFLINE=1, and a socket guard (a sitecustomize on PYTHONPATH, so in every Python
process of the run) refuses and records any connection or name lookup beyond this machine. The
ledger of a rehearsal decides nothing (every claim NOT RUN, its value shown): stand-ins are not evidence.

Part of `make test` (REPRO_REHEARSAL=0 leaves it out; `make test-rehearsal` runs it alone). Its ~75
experiment jobs start warm (shared/warm.py, on in a rehearsal): the server runs under the socket guard too."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from conftest import WORKFLOW_ENV as ENV

pytestmark = [pytest.mark.rehearsal, pytest.mark.workflow,
              pytest.mark.skipif(os.environ.get("REPRO_REHEARSAL") == "0", reason="REPRO_REHEARSAL=0: left out")]

SOCKET_GUARD = '''
import os, socket

_LOG = os.environ["REPRO_SOCKET_LOG"]
_LOCAL = ("127.0.0.1", "::1", "localhost", "0.0.0.0", "")


def _refuse(what):
    with open(_LOG, "a") as f:
        f.write(f"{os.getpid()} {what}\\n")
    raise OSError(f"network access refused by the rehearsal test: {what}")


_connect, _connect_ex, _getaddrinfo = socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo


def connect(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in _LOCAL:
        _refuse(f"connect {address}")
    return _connect(self, address)


def connect_ex(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in _LOCAL:
        _refuse(f"connect {address}")
    return _connect_ex(self, address)


def getaddrinfo(host, *args, **kwargs):
    if host not in _LOCAL and not str(host).startswith("127."):
        _refuse(f"getaddrinfo {host}")
    return _getaddrinfo(host, *args, **kwargs)


socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo = connect, connect_ex, getaddrinfo
'''


def test_full_profile_rehearsal_runs_offline(tmp_path):
    guard = tmp_path / "guard"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(SOCKET_GUARD)
    log = tmp_path / "sockets.log"
    env = {**ENV, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "disabled",
           "REPRO_SOCKET_LOG": str(log), "PYTHONPATH": os.pathsep.join([str(guard), ENV.get("PYTHONPATH", "")])}
    probe = subprocess.run([sys.executable, "-c", "import socket; socket.getaddrinfo('huggingface.co', 443)"],
                           env=env, capture_output=True, text=True)
    assert probe.returncode != 0 and "refused by the rehearsal test" in probe.stderr   # the guard is on
    log.unlink()
    results = tmp_path / "results"
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "--nolock", "--config", "profile=full", "rehearsal=1",
           f"results={results}"]
    run = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=1500)
    assert run.returncode == 0, (run.stdout + run.stderr)[-6000:]
    assert not log.exists(), f"network access during the rehearsal: {log.read_text()}"
    dry = subprocess.run([*cmd, "-n"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert dry.returncode == 0 and "Nothing to be done" in dry.stdout + dry.stderr, dry.stdout[-3000:]

    root = results / "rehearsal"
    papers = sorted(p.parent.name for p in (REPO / "papers").glob("*/rules.smk"))
    for paper in papers:
        assert (root / "assets" / paper / "overlay.yaml").is_file()
        artifacts = [root / paper / f"{paper}.ipynb", root / paper / "metrics.json",
                     *(root / paper).glob("metrics/*.json"), *(root / paper).glob("tables/*.md"),
                     *(root / paper).glob("figures/*.png")]
        for art in artifacts:
            if not art.name.endswith(".provenance.json"):
                sidecar = art.with_name(art.name + ".provenance.json")
                assert sidecar.is_file(), f"no provenance for {art}"
                assert json.loads(sidecar.read_text())["profile"] in ("full", "rehearsal")
    # the full profile's paper metrics on stand-in weights, floors included (E2GAN's zero-shot floor once had none)
    arms = json.loads((root / "e2gan" / "metrics" / "concept_table.json").read_text())["arms"]
    assert all(arms[a]["fid"]["values"][0] >= 0 for a in ("floor_zero_shot", "lora_searched", "full_ft"))
    p2l = json.loads((root / "p2l" / "metrics" / "main_sr.json").read_text())["methods"]
    assert all(p2l[m]["fid"]["values"][0] >= 0 for m in ("ldps", "psld", "p2l"))
    ledger = json.loads((root / "claims.json").read_text())
    assert ledger["profile"] == "rehearsal"
    assert {c["status"] for c in ledger["claims"]} == {"NOT RUN"}                 # stand-ins decide nothing
    assert any(c["reproduced"] is not None for c in ledger["claims"])            # ... but the values are shown
