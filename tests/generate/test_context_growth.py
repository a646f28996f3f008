"""A conversation ended by context_exhausted: status shows how far it really got, and it goes on, from its last
committed turn, when model.context_length grows; when it shrinks, the conversation ends where a fresh run ends it
(issue 45, item 1), and status shows that work before the rerun."""

import logging

import pytest

from shardgen.config import Config
from shardgen.store import db
from shardgen.generate import checkpoint
from shardgen.generate.shard import generate_shard
from shardgen.layout import Layout
from shardgen.merge.freshness import StaleError, changed_by_config, check
from shardgen.prompts.split import split
from shardgen.prompts.stage import build_prompts
from shardgen.report.status import config_line, status
from shardgen.model.target import ModelInfo

from helpers import part_rows, run_merge


def _text(model: ModelInfo, tokens: int, word: str) -> str:
    text = " ".join(f"{word}{i} about rivers" for i in range(tokens))
    while len(model.encode([{"role": "user", "content": text}], {})) > tokens:
        text = text[: int(len(text) * 0.9)]
    return text


@pytest.fixture
def cut(make_config, write_jsonl):
    """One four-turn conversation generated under context_length 512: turns 1 and 2 fit, turn 3 (~500 prompt
    tokens + 24 new) does not. Returns the layout and a config for a given context_length."""
    model = ModelInfo.from_config(make_config([{"name": "x", "path": write_jsonl("x.jsonl", []),
                                                "format": "prompt"}]).model)
    turns = [_text(model, 150, w) for w in ("alpha", "beta", "gamma")] + ["Done?"]
    conversation = [m for t in turns for m in ({"from": "human", "value": t}, {"from": "gpt", "value": "ok"})]
    path = write_jsonl("chat.jsonl", [{"conversations": conversation}])

    def config(context_length):
        return make_config([{"name": "chat", "path": path, "format": "sharegpt", "multi_turn": "each_turn"}],
                           model={"context_length": context_length}, shards=1)

    small = config(512)
    layout = Layout(small.results)
    build_prompts(small, layout.prompts_dir)
    split(layout.prompts, layout.split_dir, 1)
    generate_shard(small, 0, layout.done(0))
    assert [r["turn"] for r in part_rows(layout) if r["finish_reason"] == "context_exhausted"] == [3]
    return layout, config


def test_status_shows_the_last_generated_turn_of_a_conversation_cut_by_context(cut):
    layout, _ = cut
    (row,) = status(layout)
    assert (row["done"], row["max_turn"], row["turns"]) == (True, 2, 2)  # turn 3 never ran


def test_a_larger_context_continues_conversations_it_ended(cut, caplog):
    layout, config = cut
    first = {p: p.read_bytes() for p in layout.shard_dir(0).glob("part-*.parquet")}
    (ended,) = [r for r in part_rows(layout) if r["finish_reason"] == "context_exhausted"]
    caplog.set_level(logging.INFO, logger="shardgen")
    larger = config(1024)
    build_prompts(larger, layout.prompts_dir)  # as the workflow does after the change: the prompt set rebuilt
    split(layout.prompts, layout.split_dir, 1)
    generate_shard(larger, 0, layout.done(0))
    assert "1 conversation(s) ended by context_exhausted go on" in caplog.text  # said at the rerun
    assert {p: p.read_bytes() for p in first} == first  # committed parts untouched
    rows = part_rows(layout)
    generated = sorted(r["turn"] for r in rows if r["finish_reason"] in ("stop", "length"))
    assert generated == [1, 2, 3, 4]  # turns 1 and 2 kept, 3 and 4 generated now
    turn3 = next(r for r in rows if r["turn"] == 3 and r["finish_reason"] != "context_exhausted")
    assert turn3["gen_key"] == ended["gen_key"]  # the same turn: its history is the committed turns'
    con = checkpoint.connect(layout)
    db.define_views(con, "winners")
    assert con.execute("SELECT end_reason, generated_turns FROM outcomes").fetchall() == [("complete", 4)]
    (row,) = status(layout)
    assert (row["max_turn"], row["turns"]) == (4, 4)


def _rerun(config, layout: Layout):
    """What the workflow does after a config change: the prompt set rebuilt, split, the shard generated, merged."""
    build_prompts(config, layout.prompts_dir)
    split(layout.prompts, layout.split_dir, 1)
    generate_shard(config, 0, layout.done(0))
    return run_merge(layout).to_pylist()


def _ends(layout: Layout) -> list[tuple]:
    con = checkpoint.connect(layout)
    db.define_views(con, "winners")
    return con.execute("SELECT end_reason, generated_turns FROM outcomes").fetchall()


def test_a_smaller_context_ends_a_conversation_where_a_fresh_run_does(cut, tmp_path, caplog):
    layout, config = cut
    run_merge(layout)
    smaller = config(250)  # turn 1 (~150 prompt tokens + 24) fits, turn 2 (~330 + 24) no longer does
    with pytest.raises(StaleError, match="context_length"):  # the report's check on the dataset made at 512
        check(smaller, layout.dataset)
    changes = changed_by_config(smaller, layout)
    (row,) = status(layout, changes)
    assert (row["state"], row["done"], changes.refit) == ("stale", False, {0: 1})  # work, before the rerun
    assert "1 conversations end elsewhere under model.context_length 250" in config_line(changes)

    caplog.set_level(logging.INFO, logger="shardgen")
    rerun = _rerun(smaller, layout)
    assert "1 conversation(s) end at a turn that no longer fits model.context_length 250" in caplog.text
    fresh = Layout(tmp_path / "fresh")
    fresh_data = _rerun(Config.from_dict({**smaller.raw, "results_dir": str(fresh.root)}), fresh)
    assert [(r["gen_key"], r["turn"]) for r in rerun] == [(r["gen_key"], r["turn"]) for r in fresh_data]
    assert [r["turn"] for r in rerun] == [1]
    assert _ends(layout) == _ends(fresh) == [("context_exhausted", 1)]
    assert check(smaller, layout.dataset) == 1
    (row,) = status(layout, changed_by_config(smaller, layout))
    assert (row["state"], row["stale_rows"]) == ("done", 1)  # the turn 2 made at 512 is kept aside, not used

    larger = config(512)  # back: turn 2 fits again, and the row committed for it is the dataset's again
    changes = changed_by_config(larger, layout)
    assert changes.refit == {0: 1} and status(layout, changes)[0]["state"] == "stale"
    committed = len(part_rows(layout))
    data = _rerun(larger, layout)
    assert [r["turn"] for r in data] == [1, 2]
    assert len(part_rows(layout)) == committed  # nothing sent again: turn 2 made at 512, turn 3's end recorded then
    assert _ends(layout) == [("context_exhausted", 2)]
