"""A shard's checkpoint is one object (generate/checkpoint.ShardCheckpoint): its done record is built and written
only under its lock, read back through one reader and removed by reset; every shard's parts are read into DuckDB one
way, full or light (a part written before a column existed reads it as null); no other module reads a done file or
loads parts itself."""

import json
import re
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shardgen
from helpers import stage
from shardgen.store import tables
from shardgen.generate import checkpoint
from shardgen.generate.checkpoint import ShardBusy, ShardCheckpoint
from shardgen.layout import Layout, part_path

PACKAGE = Path(shardgen.__file__).parent
OWNER = {"generate/checkpoint.py", "generate/checkpoint_parts.py", "generate/checkpoint_db.py",
         "generate/checkpoint_cache.py"}
T0 = datetime(2026, 12, 1, 8, 0, tzinfo=timezone.utc)


def test_the_done_record_is_written_under_the_lock_read_back_and_removed_by_reset(make_config, write_jsonl):
    path = write_jsonl("a.jsonl", [{"query": f"Count to {i}."} for i in range(3)])
    layout = stage(make_config([{"name": "a", "path": path, "format": "query_response"}]), 1)
    shard = ShardCheckpoint(layout, 0)
    record = shard.done()
    assert record == json.loads(layout.done(0).read_text()) and shard.is_done()
    assert (record["prompts"], record["generated"], record["failed"]) == (3, 3, 0)
    assert layout.shard_failed(0).exists()
    with pytest.raises(RuntimeError, match="only under its lock"):
        shard.finish(None, "cpu")
    with shard.lock():
        with pytest.raises(ShardBusy), ShardCheckpoint(layout, 0).lock():
            pass  # a second writer of the same shard is refused
        again = shard.finish(None, "cpu")
        with pytest.raises(ShardBusy, match="stop it before resetting"):
            ShardCheckpoint(layout, 0).reset()  # a running shard is not moved from under its writer
        assert shard.is_done() and shard.folder.exists()
    assert (again["prompts"], again["generated"], again["failed"]) == (3, 3, 0)
    assert shard.done()["engine"] is None and shard.done()["gpu"] == "cpu"  # rewritten under the lock
    moved = shard.reset()
    assert shard.done() is None and not shard.is_done() and not shard.folder.exists()
    assert moved.parent == layout.reset_dir and len(list(moved.glob("part-*.parquet"))) >= 1


def _row() -> dict:
    return {"prompt_id": "p0", "gen_key": "g0", "shard": 0, "attempt": 1, "completion": "x", "output_ids": [1],
            "finish_reason": "stop", "prompt_tokens": 3, "completion_tokens": 1, "cached_tokens": 0, "latency_s": 0.1,
            "submitted_at": T0, "finished_at": T0, "gpu": "0", "error": None, "conversation_id": "p0", "turn": 1,
            "base_key": "g0", "messages": None, "prompt_ids": None, "temperature": 0.7, "top_p": 0.95, "top_k": -1,
            "min_p": 0.0, "repetition_penalty": 1.0}


def test_a_part_written_before_a_column_existed_reads_it_as_null_in_full_and_light(tmp_path):
    layout = Layout(tmp_path)
    folder = layout.shard_dir(0)
    folder.mkdir(parents=True)
    old = pa.Table.from_pylist([_row()], schema=tables.PART).drop_columns(["base_key", "min_p"])
    pq.write_table(old, part_path(folder, 0))
    con = checkpoint.connect(layout)
    assert [r[0] for r in con.execute("DESCRIBE parts").fetchall()] == [*tables.PART.names, "filename",
                                                                        "file_row_number"]
    assert con.execute("SELECT gen_key, base_key, min_p FROM parts").fetchall() == [("g0", None, None)]
    light, unreadable, _ = checkpoint.open_light(layout, "SELECT * FROM _prompts_contract")
    assert not unreadable
    assert light.execute("SELECT gen_key, base_key FROM parts").fetchall() == [("g0", None)]


def test_no_module_but_the_checkpoint_reads_a_done_file_or_loads_parts():
    done_read = re.compile(r"done\w*[(\w.)]*\.(read_text|exists|is_file|unlink)\(")
    parts_load = re.compile(r"(VIEW|TABLE|INTO) parts\b|parquet_view\(con, \"parts\"")
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        text = path.read_text()
        found += [f"{name}: {m.group(0)}" for pattern in (done_read, parts_load) for m in pattern.finditer(text)
                  if name not in OWNER]
    assert not found
    assert any(done_read.search((PACKAGE / name).read_text()) for name in OWNER)  # the pattern does match
