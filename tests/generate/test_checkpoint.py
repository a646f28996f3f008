from datetime import datetime, timedelta, timezone

import duckdb
import pyarrow.parquet as pq

from shardgen.store import tables
from shardgen.generate.checkpoint import PartWriter, outcomes
from shardgen.layout import Layout

T0 = datetime(2026, 12, 1, 8, 0, tzinfo=timezone.utc)


def part_row(i, **kw):
    row = {"prompt_id": f"p{i}", "gen_key": f"g{i}", "shard": 0, "attempt": 1, "completion": f"text {i} ünïcode",
           "output_ids": list(range(i)), "finish_reason": "stop", "prompt_tokens": 10 + i, "completion_tokens": i,
           "cached_tokens": 0, "latency_s": 0.5 * i, "submitted_at": T0, "finished_at": T0 + timedelta(seconds=i),
           "gpu": "0", "error": None, "conversation_id": f"p{i}", "turn": 1, "base_key": f"g{i}", "messages": None,
           "prompt_ids": None, "temperature": 0.7, "top_p": 0.95, "top_k": -1, "min_p": 0.0,
           "repetition_penalty": 1.0, "token_logprobs": None, "top_ids": None, "top_logprobs": None,
           "logprob_mean": None, "logprob_min": None, "topk_entropy_mean": None}
    return {**row, **kw}


def test_parts_with_nulls_read_back_through_a_duckdb_glob_unchanged(tmp_path):
    rows_a = [part_row(0, completion=None, output_ids=[], finish_reason="abort", error="engine said no"),
              part_row(1), part_row(2, cached_tokens=None, gpu=None)]
    rows_b = [part_row(3, shard=1, attempt=2, finish_reason="length", output_ids=[2**31 - 1, 0])]
    PartWriter(tmp_path / "shard-000").commit(rows_a)
    PartWriter(tmp_path / "shard-001").commit(rows_b)
    table = duckdb.sql(f"SELECT * FROM '{tmp_path}/shard-*/part-*.parquet' ORDER BY prompt_id").arrow()
    if hasattr(table, "read_all"):  # newer duckdb returns a RecordBatchReader
        table = table.read_all()
    assert table.schema.names == tables.PART.names
    # DuckDB names list children "l" and spells UTC "Etc/UTC": the same types, so a cast is lossless
    assert table.cast(tables.PART).to_pylist() == rows_a + rows_b


def test_part_numbers_continue_and_outcomes_per_gen_key(tmp_path):
    layout = Layout(tmp_path)
    writer = PartWriter(layout.shard_dir(0))
    first = writer.commit([part_row(0), part_row(1, finish_reason="abort", error="x")])
    second = PartWriter(layout.shard_dir(0)).commit([part_row(2, finish_reason="length")])
    assert (first.name, second.name) == ("part-00000.parquet", "part-00001.parquet")
    assert not list(layout.shard_dir(0).glob(".*"))  # no temp files left behind
    PartWriter(layout.shard_dir(1)).commit([part_row(1, finish_reason="stop"), part_row(5, finish_reason="abort"),
                                            part_row(6, finish_reason="context_exhausted", turn=2),
                                            part_row(7, finish_reason="abort"), part_row(7, finish_reason="abort")])
    found = outcomes(layout)
    assert found.generated == {"g0", "g1", "g2"}  # a later success supersedes the failure
    assert found.ended == {"g6"} and found.aborts == {"g5": 1, "g7": 2}
    assert pq.read_metadata(first).num_rows == 2


def test_a_damaged_part_is_named_by_status_and_quarantined_by_generate(tmp_path):
    from shardgen.generate.progress import run_progress

    layout = Layout(tmp_path)
    layout.split_dir.mkdir(parents=True)
    pq.write_table(tables.PROMPTS.empty_table(), layout.split(0))
    writer = PartWriter(layout.shard_dir(0))
    first, second = writer.commit([part_row(0)]), writer.commit([part_row(1)])
    first.write_bytes(first.read_bytes()[:100])  # truncated: footer gone; the first file DuckDB would bind to
    state = run_progress(layout).shards[0]
    assert state.lost == [f"{first.name} unreadable"] and first.exists()  # status only reads
    assert [c.attempt for c in state.commits] == [1] and state.stale_rows == 1
    assert outcomes(layout).generated == {"g1"}
    assert not first.exists() and (layout.shard_dir(0) / "quarantine" / first.name).exists()
    assert second.exists()


def test_a_part_another_job_moved_to_quarantine_first_is_left_there(tmp_path):
    """Each shard's generate job reads every shard's parts (a conversation's earlier turns): two jobs starting at
    once both find another shard's damaged part unreadable, and the one that moves it second finds it gone."""
    from shardgen.generate.checkpoint_parts import quarantine

    part = PartWriter(Layout(tmp_path).shard_dir(1)).commit([part_row(0)])
    part.write_bytes(part.read_bytes()[:100])
    moved = quarantine(part, "truncated")
    assert quarantine(part, "truncated") == moved and moved.read_bytes() and not part.exists()
