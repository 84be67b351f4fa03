"""shared.warm: a job run through the warm-start server behaves as the same job run cold (argv, working
directory, environment, stdin/stdout/stderr, exit status, fresh repo modules), falls back to a cold
start when it cannot be served as one, and dies with its client."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO

PROBE = '''
import json, os, random, sys
import probe_dep
data = sys.stdin.read()
print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "env": os.environ.get("PROBE_VAR"),
                  "stdin": data, "dep": probe_dep.VALUE, "main": __name__, "pid": os.getpid(),
                  "random": random.random()}))
print("to stderr", file=sys.stderr)
args = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a)
if "sleep" in args:
    open(args["sleep"], "w").write(str(os.getpid()))
    import time
    time.sleep(60)
sys.exit(int(args.get("exit", "0")))
'''


@pytest.fixture
def server(tmp_path):
    """A server preloading only json (fast), its socket and the jobs' environment."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "probe.py").write_text(PROBE)
    (work / "probe_dep.py").write_text("VALUE = 1\n")
    sock = tmp_path / "w.sock"
    env = {k: v for k, v in os.environ.items() if k != "REPRO_WARM_DEBUG"}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.Popen([sys.executable, "-m", "shared.warm", "serve", str(sock), "--preload", "json"],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(200):
        if sock.exists():
            break
        time.sleep(0.05)
    assert sock.exists(), proc.stderr.read() if proc.poll() is not None else "no socket"
    yield sock, work, env
    proc.terminate()
    proc.wait(timeout=10)
    assert not sock.exists()   # the server removes its socket on the way out


def run(sock, work, env, *args, stdin="", **extra):
    cmd = [sys.executable, "-m", "shared.warm", str(sock), "-m", "probe", *args]
    return subprocess.run(cmd, cwd=work, env={**env, "REPRO_WARM_DEBUG": "1", **extra}, input=stdin,
                          capture_output=True, text=True, timeout=60)


def test_a_served_job_is_the_job(server):
    sock, work, env = server
    out = run(sock, work, env, "a", "exit=3", stdin="in\n")
    assert out.returncode == 3, out.stderr
    assert "cold start" not in out.stderr   # it was served
    got = json.loads(out.stdout)
    assert got["argv"] == ["a", "exit=3"] and got["cwd"] == str(work) and got["stdin"] == "in\n"
    assert got["main"] == "__main__" and "to stderr" in out.stderr
    # the repo's modules are read fresh by every job: an edit is seen without restarting the server
    (work / "probe_dep.py").write_text("VALUE = 2\n")
    again = json.loads(run(sock, work, env).stdout)
    assert again["dep"] == 2 and again["pid"] != got["pid"] and again["random"] != got["random"]


def test_a_different_environment_or_no_server_runs_cold(server, tmp_path):
    sock, work, env = server
    out = run(sock, work, env, PROBE_VAR="x")   # an import could read it: not the server's environment
    assert "cold start (environment differs in ['PROBE_VAR'])" in out.stderr
    assert json.loads(out.stdout)["env"] == "x" and out.returncode == 0
    out = run(tmp_path / "none.sock", work, env, "exit=4")
    assert "cold start (no server)" in out.stderr and out.returncode == 4


def test_killing_the_client_kills_the_job(server, tmp_path):
    sock, work, env = server
    marker = tmp_path / "pid"
    client = subprocess.Popen([sys.executable, "-m", "shared.warm", str(sock), "-m", "probe", f"sleep={marker}"],
                              cwd=work, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        if marker.exists() and marker.read_text():
            break
        time.sleep(0.05)
    job = int(marker.read_text())
    assert job != client.pid   # the job is the server's child, not the client
    client.send_signal(signal.SIGKILL)
    client.wait()
    for _ in range(100):
        try:
            os.kill(job, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the job outlived its killed client")


def test_the_server_exits_with_its_parent(tmp_path):
    sock = tmp_path / "p.sock"
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    server = subprocess.Popen([sys.executable, "-m", "shared.warm", "serve", str(sock), "--parent", str(parent.pid),
                               "--preload", ""], cwd=REPO)
    for _ in range(200):
        if sock.exists():
            break
        time.sleep(0.05)
    parent.kill()
    parent.wait()
    assert server.wait(timeout=10) == 0 and not sock.exists()
