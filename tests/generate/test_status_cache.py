"""`shardgen status` reads the parts' light columns through each shard folder's status cache: its counts equal those
read from the parts themselves after new commits, a quarantined or removed part, a part replaced under the same name,
a changed prompt set, an unreadable part, and a damaged cache (ignored and rebuilt, never an error)."""

import glob
import os
from datetime import datetime, timedelta, timezone

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from shardgen.store import db
from shardgen.generate import checkpoint, checkpoint_cache, checkpoint_db, checkpoint_parts, progress
from shardgen.generate.checkpoint import PartWriter, quarantine
from shardgen.layout import Layout, part_files

T0 = datetime(2026, 12, 1, 8, 0, tzinfo=timezone.utc)
QUERIES = ("shard_progress", "part_progress")


def _row(shard, key, **kw):
    return {"prompt_id": key, "gen_key": key, "shard": shard, "attempt": 1, "completion": "x", "output_ids": [1, 2],
            "finish_reason": "stop", "prompt_tokens": 5, "completion_tokens": 2, "cached_tokens": 0, "latency_s": 1.0,
            "submitted_at": T0, "finished_at": T0 + timedelta(seconds=len(key)), "gpu": "0", "error": None,
            "conversation_id": key, "turn": 1, "base_key": key, "messages": None, "prompt_ids": None, **kw}


def _split(layout, shard, keys):
    layout.split_dir.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"prompt_id": keys, "gen_key": keys, "max_new_tokens": pa.array([8] * len(keys),
                                                                                             pa.int32())}),
                   layout.split(shard))


def _commit(layout, shard, keys, **kw):
    return PartWriter(layout.shard_dir(shard)).commit([_row(shard, k, **kw) for k in keys])


def _layout(tmp_path):
    layout = Layout(tmp_path)
    for shard in (0, 1):
        keys = [f"{shard}-{i}" for i in range(20)]
        _split(layout, shard, keys)
        for lo in range(0, 12, 3):
            _commit(layout, shard, keys[lo:lo + 3])
        _commit(layout, shard, [f"{shard}-old-{i}" for i in range(2)])  # stale: not in the split
    return layout


def _answer(con, unreadable):
    parts = sorted(con.execute("SELECT * FROM parts").fetchall(), key=repr)
    return parts, {q: sorted(db.query(con, q), key=repr) for q in QUERIES}, sorted(unreadable)


def direct(layout):
    """What status would read without the cache: every readable part opened."""
    files = sorted(glob.glob(layout.parts_glob))
    unreadable = checkpoint_parts.unreadable(files)
    con = duckdb.connect()
    if readable := [f for f in files if f not in unreadable]:
        con.execute(f"CREATE TABLE parts AS {checkpoint_db.parts_query(con, readable, checkpoint_db.LIGHT)}")
    else:
        db.create_empty(con, "parts", checkpoint_db.LIGHT)
    checkpoint_db.define_prompt_set(con, progress._split_prompts(layout))
    return _answer(con, unreadable)


def cached(layout):
    con, unreadable, _ = checkpoint.open_light(layout, progress._split_prompts(layout))
    return _answer(con, unreadable)


def _committed(answer):
    return {row["shard"]: row["committed"] for row in answer[1]["shard_progress"]}


def _warm(layout):
    """A status call that writes both folders' caches, and equals the direct read."""
    first = cached(layout)
    assert first == direct(layout)
    for shard in (0, 1):
        assert layout.status_cache(layout.shard_dir(shard)).exists()
    return first


def test_a_warm_cache_gives_the_direct_counts(tmp_path):
    layout = _layout(tmp_path)
    first = _warm(layout)
    assert _committed(first) == {0: 12, 1: 12}
    assert cached(layout) == first == direct(layout)
    assert {r["filename"] for r in first[1]["part_progress"]} == {str(p) for s in (0, 1)
                                                                  for p in part_files(layout.shard_dir(s))}


def test_new_commits_are_read(tmp_path):
    layout = _layout(tmp_path)
    _warm(layout)
    _commit(layout, 0, ["0-12", "0-13"])
    after = cached(layout)
    assert after == direct(layout)
    assert _committed(after) == {0: 14, 1: 12}
    assert cached(layout) == after  # and the rewritten cache holds them


def test_a_quarantined_or_removed_part_is_dropped(tmp_path):
    layout = _layout(tmp_path)
    _warm(layout)
    parts = part_files(layout.shard_dir(0))
    quarantine(parts[0], "test")
    (part_files(layout.shard_dir(1))[1]).unlink()
    after = cached(layout)
    assert after == direct(layout)
    assert _committed(after) == {0: 9, 1: 9}
    assert str(parts[0]) not in {r["filename"] for r in after[1]["part_progress"]}
    assert cached(layout) == after


def test_a_part_replaced_under_the_same_name_is_read_again(tmp_path):
    layout = _layout(tmp_path)
    _warm(layout)
    last = part_files(layout.shard_dir(0))[-1]
    last.unlink()  # a reset then a new commit: the same name, other rows
    replaced = _commit(layout, 0, ["0-15", "0-16"])
    assert replaced == last
    after = cached(layout)
    assert after == direct(layout)
    assert _committed(after) == {0: 14, 1: 12}


def test_a_changed_prompt_set_counts_against_the_new_split(tmp_path):
    layout = _layout(tmp_path)
    _warm(layout)
    _split(layout, 0, ["0-0", "0-1", "0-old-0"])  # fewer prompts, and a stale row is current again
    after = cached(layout)
    assert after == direct(layout)
    assert _committed(after) == {0: 3, 1: 12}
    stale = {r["filename"]: r["stale_rows"] for r in after[1]["part_progress"]}
    assert sum(v for k, v in stale.items() if "shard-000" in k) == 11


def test_a_damaged_cache_is_ignored_and_rebuilt(tmp_path):
    layout = _layout(tmp_path)
    expected = _warm(layout)
    cache0, cache1 = (layout.status_cache(layout.shard_dir(s)) for s in (0, 1))
    cache0.write_bytes(cache0.read_bytes()[:200])  # cut short
    pq.write_table(pa.table({"x": [1]}), cache1)  # another file in its place
    assert cached(layout) == expected
    assert pq.read_schema(cache0).metadata[checkpoint_cache.VERSION_KEY.encode()] == checkpoint_cache.VERSION.encode()
    assert cached(layout) == expected


def test_a_cache_with_damaged_rows_is_ignored(tmp_path):
    layout = _layout(tmp_path)
    expected = _warm(layout)
    cache = layout.status_cache(layout.shard_dir(0))
    data = bytearray(cache.read_bytes())
    data[4:40] = b"\0" * 36  # the footer (and its list of parts) intact, the rows not
    cache.write_bytes(bytes(data))
    assert cached(layout) == expected


def test_a_cache_listing_a_part_with_other_rows_is_not_trusted_once_the_part_changes(tmp_path):
    layout = _layout(tmp_path)
    _warm(layout)
    first = part_files(layout.shard_dir(1))[0]
    stat = first.stat()
    table = pq.read_table(first)
    pq.write_table(table.slice(0, 1), first)  # rewritten in place (never done): its size and mtime change
    os.utime(first, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    after = cached(layout)
    assert after == direct(layout)
    assert _committed(after) == {0: 12, 1: 10}


def test_an_unreadable_part_is_named_not_cached(tmp_path):
    layout = _layout(tmp_path)
    _warm(layout)
    bad = layout.shard_dir(0) / "part-00099.parquet"
    bad.write_bytes(b"not parquet")
    after = cached(layout)
    assert after == direct(layout)
    assert after[2] == [str(bad)]
    bad.unlink()
    _commit(layout, 0, ["0-19"])
    assert cached(layout) == direct(layout)


def test_a_cache_that_cannot_be_written_still_answers(tmp_path, monkeypatch):
    layout = _layout(tmp_path)

    def full_disk(path):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoint_cache, "committed", full_disk)
    assert cached(layout) == direct(layout)
    assert not layout.status_cache(layout.shard_dir(0)).exists()


def test_no_parts_yet(tmp_path):
    layout = Layout(tmp_path)
    _split(layout, 0, ["a"])
    assert cached(layout) == direct(layout)


def test_status_writes_nothing_in_the_shard_folders(tmp_path):
    """A shard folder is the generate rule's input: a file written there by status would make the next `snakemake`
    rerun the shard."""
    layout = _layout(tmp_path)
    before = {s: os.stat(layout.shard_dir(s)).st_mtime_ns for s in (0, 1)}
    _warm(layout)
    _commit(layout, 0, ["late"])
    after_commit = os.stat(layout.shard_dir(0)).st_mtime_ns
    cached(layout)
    assert os.stat(layout.shard_dir(0)).st_mtime_ns == after_commit
    assert os.stat(layout.shard_dir(1)).st_mtime_ns == before[1]
