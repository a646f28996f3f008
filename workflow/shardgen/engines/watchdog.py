"""Watch the engine's progress, not just completions: long outputs legitimately go many minutes without one.
Progress = a completion, or a log line its backend reads as progress (`Backend.read_log_line`: SGLang's decode
lines with a non-zero generation throughput). With neither for `stall_seconds`, the stall is reported and the
engine's process tree is killed (as SGLang does itself when its scheduler dies); the workflow's retry resumes from
the committed parts. An out-of-memory line is reported as the cause before SGLang's own tree kill arrives.

What a report becomes is the caller's (`on_event`: generate logs it in the shard's attempt record): engines/ knows
nothing of attempts."""

import logging
import threading
import time
from collections.abc import Callable

from shardgen.engines import LogLine

log = logging.getLogger(__name__)
OnEvent = Callable[[str, str], None]  # (event: stalled | out_of_memory, detail)


class Watchdog:
    def __init__(self, stall_seconds: float, on_event: OnEvent):
        self.stall_seconds, self.on_event = stall_seconds, on_event
        self.last_progress = time.monotonic()
        self.oom_reported = False
        self.kill: Callable[[], None] | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="shardgen-watchdog", daemon=True)

    def start(self, kill: Callable[[], None]) -> None:
        self.kill = kill
        self.last_progress = time.monotonic()
        self.thread.start()

    def progress(self) -> None:
        self.last_progress = time.monotonic()

    def saw(self, line: str, reading: LogLine) -> None:
        """One log line of the engine, as its backend read it."""
        if reading.progress:
            self.progress()
        elif reading.out_of_memory and not self.oom_reported:
            self.oom_reported = True
            self.on_event("out_of_memory", line.strip()[:500])

    def _watch(self) -> None:
        kill = self.kill
        assert kill is not None  # start() sets it before it starts this thread
        while not self.stop.wait(1.0):
            idle = time.monotonic() - self.last_progress
            if idle > self.stall_seconds:
                log.error("no engine progress for %.0f s (engine.stall_seconds=%s): killing the engine; a rerun "
                          "resumes from the committed parts", idle, self.stall_seconds)
                self.on_event("stalled", f"no progress for {idle:.0f} s")
                kill()
                return

    def close(self) -> None:
        self.stop.set()
