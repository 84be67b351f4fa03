"""`make lab` starts JupyterLab on the repo (as root too) and answers its API."""
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

from conftest import REPO

pytestmark = pytest.mark.workflow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_make_lab_serves_the_api():
    port = free_port()
    proc = subprocess.Popen(["make", "lab", f"LAB_PORT={port}", "LAB_TOKEN=t0k"], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 90
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/kernelspecs?token=t0k", timeout=2) as r:
                    specs = json.load(r)
                break
            except OSError:
                assert proc.poll() is None, "jupyter lab exited"
                time.sleep(1)
        else:
            pytest.fail("jupyter lab did not answer within 90 s")
        assert "python3" in specs["kernelspecs"]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
