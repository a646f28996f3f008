"""Every result goes through one commit: temp file fsynced, renamed into place, then its directory fsynced."""

import os

import duckdb
import pyarrow as pa
import pytest
from shardgen.store import atomic
from shardgen.merge import dataset as merge
from shardgen.store.atomic import committed, write_table, write_text


@pytest.fixture
def fsyncs(monkeypatch):
    """What each os.fsync call synced: (the path its fd names, whether the final file existed then)."""
    calls, real = [], os.fsync

    def spy(fd):
        calls.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return calls


def _check(calls, path):
    """The temp file beside `path` is synced before the rename, the directory after it."""
    temps = [c for c in calls if os.path.dirname(c) == str(path.parent) and c.endswith(".tmp")]
    assert temps and os.path.basename(temps[0]).startswith(f".{path.name}."), calls
    assert str(path.parent) in calls, calls
    assert calls.index(temps[0]) < calls.index(str(path.parent))


def test_write_text_fsyncs_the_file_and_its_directory(tmp_path, fsyncs):
    path = tmp_path / "out" / "a.json"
    write_text("{}", path)
    assert path.read_text() == "{}"
    _check(fsyncs, path)
    assert not list(path.parent.glob(".*.tmp"))


def test_write_table_fsyncs_the_file_and_its_directory(tmp_path, fsyncs):
    path = tmp_path / "t.parquet"
    write_table(pa.table({"x": [1, 2]}), path)
    _check(fsyncs, path)


def test_the_directory_is_synced_after_the_rename(tmp_path, monkeypatch):
    path, seen = tmp_path / "a.txt", []
    monkeypatch.setattr(atomic, "fsync_dir", lambda d: seen.append(path.exists()))
    write_text("x", path)
    assert seen == [True]


def test_a_failed_write_leaves_neither_file_nor_temp(tmp_path):
    path = tmp_path / "a.txt"
    with pytest.raises(RuntimeError), committed(path) as tmp:
        tmp.write_text("half")
        raise RuntimeError("writer died")
    assert list(tmp_path.iterdir()) == []


def test_merge_copies_commit_through_the_helper(tmp_path, fsyncs):
    path = tmp_path / "data.parquet"
    merge._copy(duckdb.connect(), "SELECT 1 AS x", path, "parquet")
    _check(fsyncs, path)
