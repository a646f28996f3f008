"""status by conversations and turns: shown only once a part holds a turn after the first."""

import pyarrow as pa
import pyarrow.parquet as pq

from shardgen.cli import main
from shardgen.report.status import status

from helpers import stage


def test_status_shows_conversations_and_turns_only_for_multi_turn_parts(make_config, write_jsonl, capsys):
    path = write_jsonl("a.jsonl", [{"query": f"Say {i} twice."} for i in range(6)])
    layout = stage(make_config([{"name": "a", "path": path, "format": "query_response"}],
                               checkpoint={"every_records": 2}), 2)
    rows = status(layout)
    assert "turns" not in rows[0] and sum(r["committed"] for r in rows) == 6  # single-turn: as before
    # the parts of shard 0 as a multi-turn run writes them: turns 1, 2, 3 of one conversation, ...
    parts = sorted(layout.shard_dir(0).glob("part-*.parquet"))
    turn, turns = 0, []
    for part in parts:
        table = pq.read_table(part)
        values = [(turn := turn + 1 if turn < 3 else 1) for _ in range(table.num_rows)]
        turns += values
        column = pa.array(values, pa.int32())
        table = (table.set_column(table.schema.get_field_index("turn"), "turn", column) if "turn" in table.schema.names
                 else table.append_column("turn", column))
        pq.write_table(table, part)
    rows = status(layout)
    assert rows[0]["turns"] == len(turns) == rows[0]["committed"]
    assert rows[0]["conversations"] == turns.count(1) and rows[0]["max_turn"] == max(turns) > 1
    # shard 1's parts have no turn column: first turns, one conversation each
    assert rows[1]["turns"] == rows[1]["conversations"] == rows[1]["committed"] and rows[1]["max_turn"] == 1
    assert main(["--results", str(layout.root), "status"]) == 0
    header = capsys.readouterr().out.splitlines()[0].split()
    assert header[-3:] == ["conversations", "turns", "max_turn"]


def test_the_parts_index_carries_each_parts_turn_counts(tmp_path):
    """status reads turn counts from the index (one small file per poll, not every part), the same as the parts."""
    import json
    from datetime import datetime

    from shardgen.layout import PARTS_INDEX
    from shardgen.generate.checkpoint import PartWriter
    from shardgen.report.status import _part_entries, _turns

    now = datetime.now().astimezone()
    writer = PartWriter(tmp_path)
    for k, turns in enumerate(([1, 2, 1], [3, None])):  # null: a first-turn source's row
        writer.commit([{"prompt_id": f"p{k}{i}", "gen_key": f"k{k}{i}", "shard": 0, "attempt": 1, "completion": "x",
                        "output_ids": [1], "finish_reason": "stop", "prompt_tokens": 5, "completion_tokens": 2,
                        "cached_tokens": 0, "latency_s": 1.0, "submitted_at": now, "finished_at": now, "gpu": "0",
                        "error": None, "conversation_id": f"c{k}", "turn": t} for i, t in enumerate(turns)])
    lines = [json.loads(line) for line in (tmp_path / PARTS_INDEX).read_text().splitlines()]
    assert [(e["first_turns"], e["max_turn"]) for e in lines] == [(2, 2), (1, 3)]
    from_index, _ = _part_entries(tmp_path)
    (tmp_path / PARTS_INDEX).unlink()
    from_parts, _ = _part_entries(tmp_path)
    assert _turns(from_index) == _turns(from_parts) == {"conversations": 3, "turns": 5, "max_turn": 3}
