"""Durable, atomic file commits, the one way every result is written: a temp file beside the target, flushed and
fsynced, renamed onto the target, then the directory fsynced (so the rename itself survives a power cut)."""

import os
import shutil
from contextlib import contextmanager, suppress
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from shardgen.faults import disk_full_point, disk_full_simulated, fault_point


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def committed(path: Path):
    """Yield a temp path beside `path` for any writer (pyarrow, DuckDB's COPY, text); on success it is fsynced and
    renamed onto `path`, on error removed. The temp name carries the pid: two processes may commit the same file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        fault_point("after_tmp_write")
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        fault_point("after_fsync")
        os.replace(tmp, path)
        fault_point("after_rename")
        fault_point("before_dir_fsync")
        fsync_dir(path.parent)
    finally:
        tmp.unlink(missing_ok=True)


def free_bytes(path: Path) -> int:
    """The free space of the filesystem holding path (none while SHARDGEN_FAULT simulates a full disk)."""
    return 0 if disk_full_simulated() else shutil.disk_usage(path).free


def write_table(table: pa.Table, path: Path) -> None:
    with committed(path) as tmp:
        disk_full_point()
        pq.write_table(table, tmp, compression="zstd")


def write_text(text: str, path: Path) -> None:
    with committed(path) as tmp, open(tmp, "w") as f:
        f.write(text)


def replace_text(text: str, path: Path) -> None:
    """A file that is no result (a heartbeat, a cache) replaced whole, so a reader never sees half of it: a temp file
    beside it renamed onto it, never fsynced, and outside `committed`, so that the crash tests' fault points count
    only real commits. On an error (a full disk) no temp file is left, and the error is raised."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError:
        with suppress(OSError):  # one that was never made (its folder is not there) leaves nothing to remove
            tmp.unlink()
        raise
