"""Watch the engine's progress, not just completions: long outputs legitimately go many minutes without one.
Progress = a completion, or a scheduler decode line with a non-zero generation throughput. With neither for
`stall_seconds`, the stall is logged and the engine's process tree is killed (as SGLang does itself when its
scheduler dies); the workflow's retry resumes from the committed parts. Out-of-memory lines are logged as the
cause before SGLang's own tree kill arrives."""

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from shardgen.generate.attempts import is_oom_line, log_event

log = logging.getLogger(__name__)


class Watchdog:
    def __init__(self, shard_dir: Path, attempt: int, stall_seconds: float):
        self.shard_dir, self.attempt, self.stall_seconds = shard_dir, attempt, stall_seconds
        self.last_progress = time.monotonic()
        self.oom_logged = False
        self.kill: Callable[[], None] | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="shardgen-watchdog", daemon=True)

    def start(self, kill: Callable[[], None]) -> None:
        self.kill = kill
        self.last_progress = time.monotonic()
        self.thread.start()

    def progress(self) -> None:
        self.last_progress = time.monotonic()

    def saw_line(self, line: str, row: dict | None) -> None:
        if row is not None and row["kind"] == "decode" and row["gen_throughput"]:
            self.progress()
        elif not self.oom_logged and is_oom_line(line):
            self.oom_logged = True
            log_event(self.shard_dir, self.attempt, "out_of_memory", detail=line.strip()[:500])

    def _watch(self) -> None:
        while not self.stop.wait(1.0):
            idle = time.monotonic() - self.last_progress
            if idle > self.stall_seconds:
                log.error("no engine progress for %.0f s (engine.stall_seconds=%s): killing the engine; a rerun "
                          "resumes from the committed parts", idle, self.stall_seconds)
                log_event(self.shard_dir, self.attempt, "stalled", detail=f"no progress for {idle:.0f} s")
                self.kill()
                return

    def close(self) -> None:
        self.stop.set()
