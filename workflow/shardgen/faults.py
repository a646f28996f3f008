"""Deterministic fault points for the crash tests: SHARDGEN_FAULT=POINT[:N] SIGKILLs this process (as SGLang's
tree kill would) the Nth time POINT is reached; SHARDGEN_FAULT=enospc[:N] makes the Nth part commit fail with
ENOSPC (and the disk's free space reads as none); SHARDGEN_FAULT=tokenizer_error:TEXT or tokenizer_kill:TEXT makes
the tokenizer raise (as a Rust panic does) or SIGKILLs the process (as a segfault would) on a batch whose rendered
text contains TEXT;
SHARDGEN_FAULT=engine_abort:TEXT makes the CPU engine abort every request whose prompt contains TEXT, as SGLang's
scheduler aborts a request (a failed request: listed in failed.parquet, generated again by `shardgen retry`).
Unset in production: one environment lookup per call."""

import errno
import os
import signal

FAULT_ENV = "SHARDGEN_FAULT"
POINTS = ("after_tmp_write", "after_fsync", "after_rename", "before_dir_fsync", "mid_batch", "enospc",
          "tokenizer_error", "tokenizer_kill", "engine_abort")
_seen: dict[str, int] = {}


def _armed(point: str) -> bool:
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return False
    name, _, nth = spec.partition(":")
    if name not in POINTS:
        raise ValueError(f"{FAULT_ENV}={spec!r}: unknown fault point {name!r}; known: {', '.join(POINTS)}")
    if name != point:
        return False
    _seen[point] = _seen.get(point, 0) + 1
    return _seen[point] == int(nth or 1)


def fault_point(point: str) -> None:
    if _armed(point):
        os.kill(os.getpid(), signal.SIGKILL)


def disk_full_point() -> None:
    if _armed("enospc"):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC) + " (simulated by SHARDGEN_FAULT)")


def disk_full_simulated() -> bool:
    """Whether SHARDGEN_FAULT=enospc[:N] simulates a full disk: its free space then reads as none (store.atomic)."""
    return os.environ.get(FAULT_ENV, "").partition(":")[0] == "enospc"


def tokenizer_fault_point(texts: list[str]) -> None:
    spec = os.environ.get(FAULT_ENV, "")
    name, _, marker = spec.partition(":")
    if name in ("tokenizer_error", "tokenizer_kill") and any(marker in text for text in texts):
        if name == "tokenizer_kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError(f"simulated tokenizer crash on {marker!r} (SHARDGEN_FAULT)")


def engine_abort_marker() -> str | None:
    """The TEXT of SHARDGEN_FAULT=engine_abort:TEXT, else None."""
    name, _, marker = os.environ.get(FAULT_ENV, "").partition(":")
    return marker if name == "engine_abort" and marker else None
