"""The report by turn: tokens per turn index (the tokens_by_turn query) and the turns figure, on a multi-turn
dataset as the dataset contract has it (conversation_id, turn)."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shardgen.store import db, tables
from shardgen.generate import checkpoint

from shardgen.report import figures
from shardgen.layout import Layout
from shardgen.report.summary import markdown

from helpers import CONVERSATIONS, TURN_COLUMNS, dataset_rows


@pytest.fixture(scope="module")
def con(tmp_path_factory, demo_model):
    from transformers import AutoTokenizer

    rows = dataset_rows(AutoTokenizer.from_pretrained(demo_model))
    rows[-1]["finish_reason"] = "length"
    layout = Layout(tmp_path_factory.mktemp("turns") / "results")
    layout.dataset.parent.mkdir(parents=True)
    schema = pa.schema(list(tables.DATASET) + [pa.field(n, t) for n, t in TURN_COLUMNS])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), layout.dataset)
    return checkpoint.connect(layout), rows


def test_tokens_by_turn_adds_up_per_turn_index(con):
    con, rows = con
    by_turn = db.query(con, "tokens_by_turn")
    longest = max(len(turns) for _, turns in CONVERSATIONS.values())
    assert [r["turn"] for r in by_turn] == list(range(1, longest + 1))
    for r in by_turn:
        mine = [row for row in rows if row["turn"] == r["turn"]]
        assert r["rows"] == len(mine) == sum(len(turns) >= r["turn"] for _, turns in CONVERSATIONS.values())
        assert r["output_tokens"] == sum(row["completion_tokens"] for row in mine)
        assert r["prompt_tokens"] == sum(row["prompt_tokens"] for row in mine)
    assert sum(r["cut_share"] * r["rows"] for r in by_turn) == pytest.approx(1, abs=1e-3)  # rounded to 4 places
    assert by_turn[-1]["mean_prompt_tokens"] > by_turn[0]["mean_prompt_tokens"]  # the history grows
    md = markdown({"rows": len(rows), "per_source": [], "per_shard": [], "per_turn": by_turn})
    assert "## per_turn" in md and "| turn | rows |" in md


def test_the_turns_figure_has_a_box_per_turn(con):
    con, rows = con
    fig = figures.turns(con, {})
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels == [f"{t}\n{sum(r['turn'] == t for r in rows)} rows" for t in range(1, 6)]
