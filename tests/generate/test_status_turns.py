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


def test_a_part_listed_in_the_index_but_gone_is_named_lost_and_its_rows_not_counted(make_config, write_jsonl):
    path = write_jsonl("a.jsonl", [{"query": f"Say {i} twice."} for i in range(6)])
    layout = stage(make_config([{"name": "a", "path": path, "format": "query_response"}],
                               checkpoint={"every_records": 2}), 1)
    parts = sorted(layout.shard_dir(0).glob("part-*.parquet"))
    lost = pq.read_metadata(parts[0]).num_rows
    parts[0].unlink()
    (row,) = status(layout)
    assert row["lost_parts"] == f"{parts[0].name} missing ({lost} rows)" and row["committed"] == 6 - lost
