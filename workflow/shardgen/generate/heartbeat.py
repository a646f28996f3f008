"""Whether a shard's generate process is alive, for `shardgen status`. The process rewrites
generate/shard-NNN/heartbeat.json every BEAT_SECONDS from the start of its attempt (also while the engine
starts, which takes minutes); a heartbeat older than STALE_SECONDS, or a process that is gone from this host,
means the attempt is down: SGLang takes the whole process tree with it when its scheduler dies, and a SIGKILL
leaves no trace but the silence."""

import json
import os
import socket
import threading
import time
from contextlib import contextmanager
from pathlib import Path

NAME = "heartbeat.json"
BEAT_SECONDS = 5.0
STALE_SECONDS = 30.0  # six beats missed: a loaded or shared filesystem delays a write, never by this much


def _beat(path: Path, attempt: int) -> None:
    # A sign of life, not a result: replaced atomically (status never reads half a file) but never fsynced, and
    # outside the commit helper so the crash tests' fault points count only real commits.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"attempt": attempt, "pid": os.getpid(), "host": socket.gethostname(),
                               "at": time.time()}))
    os.replace(tmp, path)


@contextmanager
def beating(shard_dir: Path, attempt: int):
    """Keep the attempt's heartbeat fresh while the block runs."""
    path = Path(shard_dir) / NAME
    _beat(path, attempt)
    stop = threading.Event()

    def loop():
        while not stop.wait(BEAT_SECONDS):
            try:
                _beat(path, attempt)
            except OSError:  # a full or flaky disk must not kill generation; status will call it down
                pass
    thread = threading.Thread(target=loop, name="shardgen-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process of that number: alive as far as we can tell
        return True
    return True


def alive(shard_dir: Path, attempt: dict, now: float) -> tuple[bool, float | None]:
    """(is the attempt's process alive, when it last gave a sign of life). Without a heartbeat file (a run
    started by an older shardgen) the attempt record's pid is checked on its own host."""
    beat = None
    try:
        beat = json.loads((Path(shard_dir) / NAME).read_text())
    except (OSError, ValueError):
        pass
    if beat and beat.get("attempt") == attempt["attempt"]:
        fresh = now - beat["at"] <= STALE_SECONDS
        here = beat["host"] == socket.gethostname()
        return fresh and (not here or _pid_alive(beat["pid"])), beat["at"]
    if attempt.get("host") == socket.gethostname() and attempt.get("pid"):
        return _pid_alive(attempt["pid"]), None
    return False, None
