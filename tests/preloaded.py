"""`shardgen` commands as real processes forked from one that has already imported torch and transformers.

The crash tests start `shardgen generate` some sixty times to kill it at a chosen moment and resume it. A fresh
Python spends about 3.5 of its 4 s start importing torch and transformers; a child forked from a server that did
that once starts in a fraction of it. Each command is still its own process: its own pid, its own environment,
working folder and files for stdout and stderr, killed by a real SIGKILL, its exit status that of a process
(-9 when killed, as subprocess reports it), killed when it outlives its timeout, as subprocess.run kills it. It
runs `shardgen.cli.main`, which the server has not imported: the child imports the package itself, after its
environment is set, as a fresh process would; its `random` and numpy generators are seeded afresh. What a fork
cannot give it: the server's hash seed (one per test worker, not one per command), and what the libraries already
imported read from the environment at import (the server starts with the test worker's, without PYTHONPATH: a
command's PYTHONPATH is put on its sys.path).

Run as a script, this file is the server: one per test worker, started on the first command, talking JSON lines
on its stdin and stdout. Imported, it is the client: `start(argv, env)` returns a Popen-like handle."""

import atexit
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy

# Imported by the server before any fork, leaving it one thread (pyarrow would start jemalloc's; it and duckdb
# import in 0.06 s). Nothing of shardgen's: a child imports it with its own environment.
PRELOAD = ("torch", "transformers", "transformers.models.nemotron_h.modeling_nemotron_h",
           "transformers.generation.utils", "tokenizers", "numpy", "yaml", "jsonschema")


def _serve() -> None:
    """Answer requests until stdin closes: start a command (fork), poll a child (reap it once it ended)."""
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    assert len(os.listdir("/proc/self/task")) == 1, "a preloaded module started a thread: forking it is unsafe"
    requests, replies = sys.stdin, sys.stdout
    for line in requests:
        request = json.loads(line)
        if request["op"] == "start":
            replies.flush()
            pid = os.fork()
            if pid == 0:
                _become(request)
                return  # the child: __main__ runs the command
            reply = {"pid": pid}
        else:  # poll
            done, status = os.waitpid(request["pid"], os.WNOHANG)
            reply = {"returncode": os.waitstatus_to_exitcode(status) if done else None}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()
    sys.exit(0)


def _become(request: dict) -> None:
    """In the forked child: the request's stdin (none), stdout, stderr, folder, environment, path and argv."""
    stdin = os.open(os.devnull, os.O_RDONLY)
    os.dup2(stdin, 0)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, fd)
        os.close(out)
    os.close(stdin)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path]
    sys.path[0] = request["cwd"]  # as `python -m` puts its folder first
    sys.path[1:1] = extra
    sys.argv = ["shardgen", *request["argv"]]
    random.seed()
    numpy.random.seed()


class Process:
    """A forked command, with the subset of subprocess.Popen the tests use."""

    def __init__(self, server: "_Server", argv: list[str], pid: int, stdout: Path, stderr: Path):
        self._server, self.args, self.pid, self._stdout, self._stderr = server, argv, pid, stdout, stderr
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._server.ask({"op": "poll", "pid": self.pid})["returncode"]
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (returncode := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.05)
        return returncode

    def kill(self) -> None:
        if self.returncode is None:
            os.kill(self.pid, signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Its stdout and stderr once it ended; killed first if it outlives timeout (TimeoutExpired then)."""
        try:
            self.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self.wait()
            raise
        out, err = self._stdout.read_text(), self._stderr.read_text()
        self._stdout.unlink()
        self._stderr.unlink()
        return out, err


class _Server:
    def __init__(self):
        # offline as the CLI sets it, here where huggingface_hub reads it (at import); PYTHONPATH: each command's own
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
        env.pop("PYTHONPATH", None)
        self._proc = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      text=True, env=env)
        self.outputs = Path(tempfile.mkdtemp(prefix="shardgen-preloaded-"))
        self.started = 0  # commands started: each one's output files are named by its number
        atexit.register(self.close)

    def ask(self, request: dict) -> dict:
        self._proc.stdin.write(json.dumps(request) + "\n")
        self._proc.stdin.flush()
        if not (reply := self._proc.stdout.readline()):
            raise RuntimeError(f"the preloaded server ended (rc {self._proc.wait()}); its stderr is the test's")
        return json.loads(reply)

    def close(self) -> None:
        self._proc.stdin.close()
        self._proc.wait()
        shutil.rmtree(self.outputs, ignore_errors=True)


_server: _Server | None = None


def start(argv: list[str], env: dict[str, str], cwd: str | Path | None = None) -> Process:
    """`shardgen *argv` in a forked process with env as its whole environment, in cwd (default: this one)."""
    global _server
    if _server is None:
        _server = _Server()
    stdout, stderr = (_server.outputs / f"{_server.started}.{name}" for name in ("out", "err"))
    _server.started += 1
    argv = [str(a) for a in argv]
    reply = _server.ask({"op": "start", "argv": argv, "env": env, "cwd": str(cwd or os.getcwd()),
                         "stdout": str(stdout), "stderr": str(stderr)})
    return Process(_server, argv, reply["pid"], stdout, stderr)


def run(argv: list[str], env: dict[str, str] | None = None, cwd: str | Path | None = None,
        timeout: float = 300) -> subprocess.CompletedProcess:
    """`shardgen *argv` to its end, as subprocess.run(..., capture_output=True, text=True) gives it (env: this
    process's environment when None)."""
    proc = start(argv, dict(os.environ) if env is None else env, cwd)
    out, err = proc.communicate(timeout)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


if __name__ == "__main__":
    _serve()
    from shardgen.cli import main  # the forked child (the server itself exited above)

    sys.exit(main(sys.argv[1:]))
