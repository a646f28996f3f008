"""The report after a rerun of one shard (a sampling change made every old row stale; shard 1 ran again a day
later): the headline, the throughput figure, the per-shard table and the tail warning read the same rows (the
dataset's) on the same clock (the run's real timeline: the union of the shards' attempts' spans of them), so stale
rows and the days between attempts count nowhere, and shards that ran one after another are not counted as side by
side (issue 45, item 2)."""

from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shardgen.store import db, tables
from shardgen.generate.checkpoint import PartWriter
from shardgen.layout import Layout
from shardgen.report.figures import bucket_seconds
from shardgen.generate import checkpoint
from shardgen.report.summary import summary, tail_note

DAY0 = datetime(2026, 12, 1, tzinfo=timezone.utc)
TOKENS, SPAN_S = 100, 100  # per row; each attempt's span of its rows


def rows(keys, shard, attempt, start):
    """One row per key, finishing every SPAN_S / len(keys) seconds after a submission at `start`."""
    step = SPAN_S / len(keys)
    return [{"prompt_id": k, "gen_key": k, "base_key": k, "conversation_id": k, "turn": 1, "shard": shard,
             "attempt": attempt, "completion": "x", "output_ids": [1] * TOKENS, "finish_reason": "stop",
             "prompt_tokens": 5, "completion_tokens": TOKENS, "submitted_at": start,
             "finished_at": start + timedelta(seconds=step * (i + 1))} for i, k in enumerate(keys)]


@pytest.fixture
def rerun(tmp_path):
    layout = Layout(tmp_path / "results")
    current = {0: [f"new{i}" for i in range(10)], 1: [f"new{i}" for i in range(10, 20)]}
    layout.prompts.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{"prompt_id": k, "gen_key": k, "source": "s", "turns": ["q"]}
                                         for keys in current.values() for k in keys], schema=tables.PROMPTS),
                   layout.prompts)
    dataset = []
    for shard, keys in current.items():
        writer = PartWriter(layout.shard_dir(shard))
        writer.commit(rows([f"old{shard}-{i}" for i in range(10)], shard, 1, DAY0))  # before the sampling change
        made = rows(keys, shard, 2, DAY0 + timedelta(days=1, hours=shard))  # shard 1 reran an hour after shard 0
        writer.commit(made)
        dataset += made
    layout.dataset.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(dataset, schema=tables.DATASET), layout.dataset)
    return checkpoint.connect(layout)


def test_headline_figure_table_and_tail_use_the_dataset_rows_on_one_clock(rerun):
    record = summary(rerun)
    # shard 1's rows were made an hour after shard 0's: two spans one after the other, the hour between not counted
    assert (record["dataset_generation_wall_s"], record["dataset_shards_at_once"]) == (2 * SPAN_S, 1)
    assert record["dataset_output_tokens_per_s"] == 20 * TOKENS / (2 * SPAN_S)

    bucket = bucket_seconds(record["dataset_generation_wall_s"])
    timeline = db.query(rerun, "timeline", bucket_s=bucket)
    assert max(r["t"] for r in timeline) <= 2 * SPAN_S  # not a day later for the shard that reran
    assert min(r["t"] for r in timeline if r["shard"] == 1) >= SPAN_S  # after shard 0, where it ran
    tokens = sum(r["output_tokens_per_s"] * bucket for r in timeline)
    assert tokens == pytest.approx(record["dataset_completion_tokens"])
    total = {}
    for r in timeline:
        total[r["t"]] = total.get(r["t"], 0) + r["output_tokens_per_s"]
    assert max(total.values()) >= record["dataset_output_tokens_per_s"]  # the headline within the curve's reach

    shard0 = record["per_shard"][0]
    assert (shard0["requests"], shard0["dataset_rows"], shard0["dataset_wall_s"]) == (20, 10, SPAN_S)
    assert sum(s["dataset_completion_tokens"] for s in record["per_shard"]) == record["dataset_completion_tokens"]

    tails = db.query(rerun, "tail")
    assert [t["after_first_shard_end_s"] for t in tails] == [0, 0] and tails[0]["run_wall_s"] == 2 * SPAN_S
    assert tail_note(tails).endswith("(fine).")  # one attempt each: the reset shard's old attempt is not in it


def test_a_shard_made_in_two_attempts_is_named_in_the_tail_note():
    tails = [{"shard": 0, "after_first_shard_end_s": 0.0, "run_wall_s": 100.0, "attempts": 1},
             {"shard": 1, "after_first_shard_end_s": 30.0, "run_wall_s": 100.0, "attempts": 2}]
    note = tail_note(tails)
    assert "30.0 s between the shortest and the longest shard's generation wall, 30.0% of the 100.0 s" in note
    assert note.endswith("Shard(s) 1 made their rows in several attempts, their spans summed.")


def test_shards_run_side_by_side_in_part_count_once_where_they_overlap(tmp_path):
    layout = Layout(tmp_path / "results")
    keys = {0: [f"a{i}" for i in range(10)], 1: [f"b{i}" for i in range(10)], 2: [f"c{i}" for i in range(10)]}
    layout.prompts.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{"prompt_id": k, "gen_key": k, "source": "s", "turns": ["q"]}
                                         for shard in keys.values() for k in shard], schema=tables.PROMPTS),
                   layout.prompts)
    starts = {0: 0, 1: SPAN_S / 2, 2: 3 * SPAN_S}  # 0 and 1 overlap by half a span; 2 after a pause of 1.5 spans
    dataset = []
    for shard, shard_keys in keys.items():
        made = rows(shard_keys, shard, 1, DAY0 + timedelta(seconds=starts[shard]))
        PartWriter(layout.shard_dir(shard)).commit(made)
        dataset += made
    layout.dataset.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(dataset, schema=tables.DATASET), layout.dataset)
    con = checkpoint.connect(layout)
    record = summary(con)
    assert (record["dataset_generation_wall_s"], record["dataset_shards_at_once"]) == (2.5 * SPAN_S, 2)
    assert record["dataset_output_tokens_per_s"] == 30 * TOKENS / (2.5 * SPAN_S)
    assert record["parts_generation_wall_s"] == 2.5 * SPAN_S  # every committed row, on the same clock
    first = {}
    for row in db.query(con, "timeline", bucket_s=1):
        first[row["shard"]] = min(first.get(row["shard"], row["t"]), row["t"])
    step = SPAN_S / 10  # each shard's first row, a step after its first submission
    assert first == {0: step, 1: SPAN_S / 2 + step, 2: 1.5 * SPAN_S + step}
