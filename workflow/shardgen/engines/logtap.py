"""Tee file descriptor 2 through a pipe. SGLang's scheduler runs in subprocesses that inherit fd 2 and log their
"Decode batch" lines there: redirecting the descriptor (not sys.stderr) is the only way to see them."""

import fcntl
import os
import termios
import threading
import time
from array import array
from collections.abc import Callable


class LogTap:
    def __init__(self, on_line: Callable[[str], None]):
        self.on_line = on_line
        self.original = os.dup(2)
        read_end, write_end = os.pipe()
        os.dup2(write_end, 2)
        os.close(write_end)
        self.read_end = read_end
        self.read_bytes = self.written_bytes = 0
        self.thread = threading.Thread(target=self._pump, name="shardgen-logtap", daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        pending = b""
        while chunk := os.read(self.read_end, 65536):
            self.read_bytes += len(chunk)
            os.write(self.original, chunk)  # the job's log still gets everything, unbuffered
            self.written_bytes += len(chunk)
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                self.on_line(line.decode("utf-8", "replace"))
        os.close(self.read_end)

    def _unread(self) -> int:
        waiting = array("i", [0])
        fcntl.ioctl(self.read_end, termios.FIONREAD, waiting)
        return waiting[0]

    def settle(self, timeout_s: float = 1.0) -> None:
        """Wait, up to timeout_s, until what was written to fd 2 so far is in the job's log: before this process
        kills itself, as the line saying why was just logged into the pipe, and a SIGKILL ends the pump with it.
        Settled once the pipe is empty and everything read was written, twice 20 ms apart (the pump counts a read
        only after the read returns)."""
        deadline, settled = time.monotonic() + timeout_s, 0
        while settled < 2 and time.monotonic() < deadline and self.thread.is_alive():  # ended: it passed on all
            try:
                idle = self._unread() == 0 and self.read_bytes == self.written_bytes
            except OSError:  # the pump closed the pipe as it ended, between the check above and this one
                return
            settled = settled + 1 if idle else 0
            time.sleep(0.02)

    def close(self, timeout_s: float = 5.0) -> None:
        """Give fd 2 back; the pipe drains once the subprocesses holding it have exited."""
        os.dup2(self.original, 2)
        self.thread.join(timeout_s)
