"""Tee file descriptor 2 through a pipe. SGLang's scheduler runs in subprocesses that inherit fd 2 and log their
"Decode batch" lines there: redirecting the descriptor (not sys.stderr) is the only way to see them."""

import os
import threading
from collections.abc import Callable


class LogTap:
    def __init__(self, on_line: Callable[[str], None]):
        self.on_line = on_line
        self.original = os.dup(2)
        read_end, write_end = os.pipe()
        os.dup2(write_end, 2)
        os.close(write_end)
        self.read_end = read_end
        self.thread = threading.Thread(target=self._pump, name="shardgen-logtap", daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        pending = b""
        while chunk := os.read(self.read_end, 65536):
            os.write(self.original, chunk)  # the job's log still gets everything, unbuffered
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                self.on_line(line.decode("utf-8", "replace"))
        os.close(self.read_end)

    def close(self, timeout_s: float = 5.0) -> None:
        """Give fd 2 back; the pipe drains once the subprocesses holding it have exited."""
        os.dup2(self.original, 2)
        self.thread.join(timeout_s)
