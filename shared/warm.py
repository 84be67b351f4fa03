"""Warm starts: a workflow's many short Python jobs forked from one process that has already imported
the heavy libraries, instead of each paying ~3–6 CPU-s to import torch and Lightning (whose import
pulls in torchmetrics, transformers and torch._dynamo).

    python -m shared.warm serve SOCKET [--parent PID]     # the server (Snakefile onstart, warm=1)
    python -m shared.warm SOCKET -m papers.p2l main ...    # a job: run there if the server is up

The client sends its argv, working directory, environment and its stdin/stdout/stderr file
descriptors (SCM_RIGHTS) to the server, which forks a child that takes them over and runs the module
as `python -m` would (`runpy`, `__main__`, `sys.argv`, `sys.path[0]` = the working directory); the
client exits with the child's status. The child is the job in every way that reaches its results:
the repo's own modules (`papers.*`, `shared.*`) are imported fresh in the child, never preloaded,
so an edit is always seen; the RNGs a cold process seeds from entropy are reseeded; torch's
default generator has never been used in the server. Only third-party libraries are preloaded.

It falls back to a plain `exec` of the same command (a cold start, identical behaviour) when the
server is absent or was started under a different environment: import-time settings (OMP_NUM_THREADS,
HF_HUB_OFFLINE, TRITON_INTERPRET, a sitecustomize on PYTHONPATH) must be the ones the job would have
had. If the client dies (snakemake cancels the job, Ctrl-C, SIGKILL), its connection closes and the
server kills the child. The server is single-threaded (a selector loop), so forking it is safe, and
it exits when its parent process (snakemake) is gone or after `IDLE_S` seconds with nothing to do.

Accounting: snakemake's `benchmark:` file of a warm job measures its client, not the job, so every
experiment job records its own cost in its provenance (`shared.provenance.process_usage`: wall since
the fork, CPU of the child and its children, peak RSS, `warm: true`; the child runs with
REPRO_WARM_JOB=1, which no job reads), and the budgets quote those (tools/bench_reproduce.py). On by
default in a local run at smoke and tiny (`make reproduce`, the test suite's smoke run) and in the
rehearsal."""
from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import sys
import time

# imported once in the server, before any fork: third-party only (see above)
PRELOAD = ("numpy", "scipy.stats", "pandas", "yaml", "torch", "lightning", "matplotlib.pyplot", "PIL.Image",
           "sklearn.linear_model", "einops")
# the environment keys a shell sets per job, which no import reads, and the client's own switch
VOLATILE_ENV = {"PWD", "OLDPWD", "SHLVL", "_", "REPRO_WARM_DEBUG"}
IDLE_S = 600
MAX_MSG = 1 << 20


def _env_key(env) -> dict:
    return {k: v for k, v in env.items() if k not in VOLATILE_ENV}


def _send(sock: socket.socket, obj, fds=()) -> None:
    data = json.dumps(obj).encode()
    socket.send_fds(sock, [len(data).to_bytes(8, "little") + data], list(fds))


def _recv(sock: socket.socket, maxfds: int = 0):
    """One message (and up to `maxfds` file descriptors); (None, fds) when the peer closed first."""
    msg, fds, _flags, _addr = socket.recv_fds(sock, MAX_MSG, maxfds)
    while msg and len(msg) < 8:
        chunk = sock.recv(8 - len(msg))
        if not chunk:
            break
        msg += chunk
    if len(msg) < 8:
        return None, fds
    size, data = int.from_bytes(msg[:8], "little"), msg[8:]
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None, fds
        data += chunk
    return json.loads(data), fds


# ----------------------------------------------------------------------------------------------- client

def client(path: str, argv: list[str]) -> int:
    """Run `python <argv>` through the server at `path`, or exec it cold when that cannot be done."""
    cold = [sys.executable, *argv]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        _send(sock, {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}, fds=(0, 1, 2))
        reply, _ = _recv(sock)
    except (OSError, ValueError):   # no server, a closed one, or an environment JSON cannot carry: cold
        reply = None
    if reply is None or reply.get("cold"):
        if os.environ.get("REPRO_WARM_DEBUG"):
            why = "no server" if reply is None else f"environment differs in {reply.get('why')}"
            print(f"shared.warm: cold start ({why})", file=sys.stderr)
        sock.close()
        os.execv(sys.executable, cold)
    status, _ = _recv(sock)   # blocks until the child exits; our death closes the socket and kills it
    return 1 if status is None else int(status["code"])


# ----------------------------------------------------------------------------------------------- server

def _child(conn: socket.socket, request: dict, fds: list[int]) -> None:
    """In the forked child: become the job, run it, exit with its status (never returns)."""
    code = 1
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for target, fd in zip((0, 1, 2), fds):
            os.dup2(fd, target)
            os.close(fd)
        conn.close()
        sys.stdout.reconfigure(line_buffering=os.isatty(1))
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ["REPRO_WARM_JOB"] = "1"   # for the job's own accounting (shared.provenance.process_usage)
        import random

        random.seed()
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        import runpy

        module, args = request["argv"][1], request["argv"][2:]
        sys.argv = [module, *args]
        sys.path[0] = request["cwd"]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        if not isinstance(exit_.code, (int, type(None))):
            print(exit_.code, file=sys.stderr)
    except BaseException:   # as python itself: the traceback on stderr, status 1
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            import atexit

            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve(path: str, parent: int | None = None, preload: tuple[str, ...] = PRELOAD) -> None:
    """Preload, listen on `path`, fork a child per request; exit when the parent dies or idle."""
    env = _env_key(os.environ)   # what the jobs must have started under (before the imports)
    for name in preload:
        try:
            __import__(name)
        except ImportError:
            pass
    # what the imports set themselves (torch: KMP_*, TORCHINDUCTOR_CACHE_DIR, ...), as they would in the job
    added = {k: v for k, v in os.environ.items() if k not in env}
    if os.path.exists(path):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".tmp")
    listener.listen(64)
    os.replace(path + ".tmp", path)   # clients see the socket only once it is listening
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, None)
    children: dict[int, socket.socket] = {}   # pid -> the client's connection
    last = time.monotonic()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    try:
        while not stop:
            for key, _ in selector.select(timeout=0.05):
                if key.data is None:   # a new client
                    conn, _ = listener.accept()
                    conn.settimeout(10)   # a client sends at once; one that does not must not stall the rest
                    try:
                        request, fds = _recv(conn, maxfds=3)
                    except (OSError, ValueError):
                        conn.close()
                        continue
                    conn.settimeout(None)
                    if request is None or len(fds) != 3 or _env_key(request["env"]) != env:
                        for fd in fds:
                            os.close(fd)
                        other = _env_key(request["env"]) if request else {}
                        _send(conn, {"cold": True, "why": sorted(k for k in set(env) | set(other)
                                                                  if env.get(k) != other.get(k))})
                        conn.close()
                        continue
                    _send(conn, {"cold": False})
                    sys.stdout.flush()
                    sys.stderr.flush()
                    pid = os.fork()
                    if pid == 0:
                        listener.close()
                        for other in children.values():
                            other.close()
                        _child(conn, {**request, "env": {**request["env"], **added}}, fds)
                    for fd in fds:
                        os.close(fd)
                    children[pid] = conn
                    selector.register(conn, selectors.EVENT_READ, pid)
                else:   # a client's connection became readable: it closed (it died), so kill its job
                    pid = key.data
                    try:
                        if not key.fileobj.recv(1):
                            os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
            while children:   # reap finished jobs, report their status
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                conn = children.pop(pid, None)
                if conn is None:
                    continue
                selector.unregister(conn)
                code = os.waitstatus_to_exitcode(status)
                try:
                    _send(conn, {"code": code if code >= 0 else 128 - code})
                except OSError:
                    pass
                conn.close()
            if children:
                last = time.monotonic()
            if parent is not None and not _alive(parent):
                break
            if time.monotonic() - last > IDLE_S:
                break
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            os.unlink(path)
        except OSError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"]:
        import argparse

        parser = argparse.ArgumentParser(prog="python -m shared.warm serve")
        parser.add_argument("socket")
        parser.add_argument("--parent", type=int, default=None, help="exit when this process is gone")
        parser.add_argument("--preload", default=",".join(PRELOAD), help="comma-separated modules to import first")
        args = parser.parse_args(argv[1:])
        serve(args.socket, args.parent, tuple(m for m in args.preload.split(",") if m))
        return 0
    if len(argv) < 3 or argv[1] != "-m":
        print("usage: python -m shared.warm SOCKET -m MODULE [ARGS...] | python -m shared.warm serve SOCKET "
              "[--parent PID] [--preload M1,M2]", file=sys.stderr)
        return 2
    return client(argv[0], argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
