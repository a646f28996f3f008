"""multi_turn: each_turn over the CPU engine: ShareGPT conversations of 1, 2 and 5 turns with system prompts (a
top-level `system` field and a `{"from": "system"}` turn), one that runs out of context at turn 3; each turn's
stored prompt is the template over the regenerated history; accounting per conversation and per turn; a SIGKILL in
the middle of conversations and a resume that never regenerates a committed turn."""

import signal
from collections import Counter

import pyarrow.parquet as pq
import pytest
from shardgen.prompts.formats import RowError, conversation
from shardgen.layout import Layout
from shardgen.model.target import ModelInfo
from shardgen.prompts.stage import build_prompts
from shardgen.prompts.split import split
from helpers import committed, generate
from helpers import part_rows, stage
from helpers import greedy_sampling, run_merge


def _long_text(model: ModelInfo, tokens: int) -> str:
    text = " ".join(f"fact{i} about rivers" for i in range(tokens))
    while len(model.encode([{"role": "user", "content": text}], {})) > tokens:
        text = text[: int(len(text) * 0.9)]
    return text


def _rows(model: ModelInfo) -> list[dict]:
    long = _long_text(model, 700)  # turns 1 and 2 fit 2048 with 24 new tokens each, turn 3 does not
    five = [{"from": "system", "value": "You are terse."}]
    for t in range(5):
        five += [{"from": "human", "value": f"Question {t + 1} about the moon?"},
                 {"from": "gpt", "value": f"Original answer {t + 1}."}]
    return [
        {"conversations": [{"from": "human", "value": "One turn only?"}, {"from": "gpt", "value": "Yes."}]},
        {"system": "You are a pirate.",
         "conversations": [{"from": "human", "value": "Hello there?"}, {"from": "gpt", "value": "Arr."},
                           {"from": "human", "value": "And then?"}, {"from": "gpt", "value": "Arr again."}]},
        {"conversations": five},
        {"conversations": [{"from": "human", "value": "A " + long}, {"from": "gpt", "value": "ok"},
                           {"from": "human", "value": "B " + long}, {"from": "gpt", "value": "ok"},
                           {"from": "human", "value": "C " + long}, {"from": "gpt", "value": "ok"},
                           {"from": "human", "value": "D"}]},
        {"conversations": [{"from": "human", "value": "x"}, {"from": "human", "value": "y"},
                           {"from": "gpt", "value": "z"}, {"from": "gpt", "value": "w"}]},  # not alternating
    ]


@pytest.fixture
def multi(make_config, write_jsonl, demo_model):
    model = ModelInfo.from_config(make_config([{"name": "x", "path": write_jsonl("x.jsonl", []),
                                                "format": "prompt"}]).model)
    path = write_jsonl("chat.jsonl", _rows(model))
    cfg = make_config([{"name": "chat", "path": path, "format": "sharegpt", "multi_turn": "each_turn"}],
                      checkpoint={"every_records": 1, "every_seconds": 30}, engine={"max_running_requests": 2},
                      model={"context_length": 2048})
    return cfg, model


def test_top_level_system_field_is_the_system_turn_for_first_too():
    row = {"system": "Be kind.", "conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Yo"}]}
    conv, _ = conversation(row, "sharegpt", {}, None)
    assert conv.messages == [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi"}]
    own = {**row, "conversations": [{"from": "system", "value": "Own."}] + row["conversations"]}
    assert conversation(own, "sharegpt", {}, None)[0].messages[0] == {"role": "system", "content": "Own."}
    conv, _ = conversation(row, "sharegpt", {}, None, "each_turn")
    assert conv.turns == ["Hi"] and conv.references == ["Yo"]
    with pytest.raises(RowError, match="not_alternating"):
        conversation({"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"},
                                        {"from": "gpt", "value": "c"}]}, "sharegpt", {}, None, "each_turn")


def test_each_turn_regenerates_on_its_own_answers_and_accounts_every_turn(multi):
    cfg, model = multi
    layout = stage(cfg, 2)
    data = run_merge(layout).to_pylist()
    by_conv: dict[str, list[dict]] = {}
    for row in sorted(data, key=lambda r: (r["conversation_id"], r["turn"])):
        by_conv.setdefault(row["conversation_id"], []).append(row)
    prompts = {r["conversation_id"]: r for r in pq.read_table(layout.prompts).to_pylist()}
    assert sorted(len(v) for v in by_conv.values()) == [1, 2, 2, 5]
    for source in prompts.values():  # the split's cost: every turn's prompt estimate plus its max_new_tokens
        one = source["prompt_tokens"] + source["max_new_tokens"]
        n = len(source["turns"])
        assert source["work_tokens"] == one if n == 1 else source["work_tokens"] > n * one
    for cid, rows in by_conv.items():
        assert [r["turn"] for r in rows] == list(range(1, len(rows) + 1))
        source = prompts[cid]
        assert all(r["prompt_id"] == cid for r in rows)
        for t, row in enumerate(rows, 1):
            assert row["reference"] == source["references"][t - 1]
            assert row["messages"][-1] == {"role": "user", "content": source["turns"][t - 1]}
            assert row["prompt_ids"] == model.encode(row["messages"], {})  # the template over that exact list
            assert row["prompt_tokens"] == len(row["prompt_ids"])
            if t > 1:  # the history is turn t-1's prompt plus its regenerated answer
                prev = rows[t - 2]
                assert row["messages"][:-2] == prev["messages"]
                assert row["messages"][-2] == {"role": "assistant", "content": prev["completion"]}
    systems = sorted(rows[0]["messages"][0]["content"] for rows in by_conv.values()
                     if rows[0]["messages"][0]["role"] == "system")
    assert systems == ["You are a pirate.", "You are terse."]
    parts = part_rows(layout)
    shards = {}
    for r in parts:
        shards.setdefault(r["conversation_id"], set()).add(r["shard"])
    assert all(len(s) == 1 for s in shards.values()), "a conversation spans two shards"
    ended = [r for r in parts if r["finish_reason"] == "context_exhausted"]
    assert len(ended) == 1 and ended[0]["turn"] == 3 and "context_length 2048" in ended[0]["error"]
    from shardgen.store import db
    from shardgen.generate import checkpoint

    con = checkpoint.connect(layout)
    db.define_views(con, "winners", "accounting")
    (acc,) = db.query(con, "accounting")
    assert (acc["read"], acc["accepted"], acc["rejected"], acc["duplicates"]) == (5, 4, 1, 0)
    assert (acc["complete"], acc["context_exhausted"], acc["failed"]) == (3, 1, 0)
    assert (acc["turns"], acc["generated_turns"], acc["context_exhausted_turns"]) == (12, 10, 2)
    assert acc["read_balances"] and acc["accepted_balances"] and acc["turns_balance"]
    # a rerun generates nothing: every turn is committed
    before = {p: p.read_bytes() for p in layout.root.glob("generate/shard-*/part-*.parquet")}
    stage(cfg, 2)
    assert {p: p.read_bytes() for p in layout.root.glob("generate/shard-*/part-*.parquet")} == before


@pytest.mark.parametrize("fault", ["mid_batch:5", "after_rename:4"])
def test_kill_in_the_middle_of_conversations_then_resume(multi, fault):
    cfg, _ = multi
    layout = Layout(cfg.results)
    build_prompts(cfg, layout.prompts_dir)
    split(layout.prompts, layout.split_dir, 1)
    rc, err = generate(cfg, layout, fault)
    assert rc == -signal.SIGKILL, err[-2000:]
    before = committed(layout)
    assert before, "killed before any part was committed: nothing to resume from"
    prompts = {r["conversation_id"]: r for r in pq.read_table(layout.prompts).to_pylist()}
    turns = {cid: len(r["turns"]) for cid, r in prompts.items()}
    rows_before = part_rows(layout)
    done_before = [r for r in rows_before if r["finish_reason"] in ("stop", "length")]
    ended = {r["conversation_id"] for r in rows_before if r["finish_reason"] == "context_exhausted"}
    reached: dict[str, int] = {}
    for r in done_before:
        reached[r["conversation_id"]] = max(reached.get(r["conversation_id"], 0), r["turn"])
    # killed between turns: a conversation whose first turns are committed and whose next turn is not
    cut = {cid: t for cid, t in reached.items() if t < turns[cid] and cid not in ended}
    assert cut, f"no conversation was killed between its turns (last committed turn per conversation: {reached})"
    assert all(sorted(r["turn"] for r in done_before if r["conversation_id"] == cid) == list(range(1, t + 1))
               for cid, t in cut.items())
    rc, err = generate(cfg, layout)
    assert rc == 0, err[-2000:]
    for path, data in before.items():
        assert path.read_bytes() == data, f"committed part {path.name} changed"
    rows = part_rows(layout)
    finished = [r for r in rows if r["finish_reason"] in ("stop", "length")]
    assert max(Counter(r["gen_key"] for r in finished).values()) == 1, "a turn was generated twice"
    assert max(Counter((r["conversation_id"], r["turn"]) for r in rows).values()) == 1, "a turn was written twice"
    assert Counter(Counter(r["conversation_id"] for r in finished).values()) == Counter({1: 1, 2: 2, 5: 1})
    assert {r["gen_key"] for r in done_before} <= {r["gen_key"] for r in finished}
    assert sum(r["finish_reason"] == "context_exhausted" for r in rows) == 1
    by_turn = {(r["conversation_id"], r["turn"]): r for r in rows}
    for cid, t in cut.items():  # resumed from its committed turns: those kept, the rest generated by the resume
        assert [by_turn[cid, k]["attempt"] for k in range(1, t + 1)] == [1] * t, cid
        later = [by_turn[cid, k]["attempt"] for k in range(t + 1, turns[cid] + 1) if (cid, k) in by_turn]
        assert later and set(later) == {2}, cid
        resumed = by_turn[cid, t + 1]
        if resumed["finish_reason"] in ("stop", "length"):  # its history is the committed turn and its answer
            last = by_turn[cid, t]  # a part row carries its prompt from turn 2 on; turn 1's is the prompts row's
            assert resumed["messages"][:-2] == (last["messages"] if t > 1 else prompts[cid]["messages"])
            assert resumed["messages"][-2] == {"role": "assistant", "content": last["completion"]}
    assert any(by_turn[cid, t + 1]["finish_reason"] in ("stop", "length") for cid, t in cut.items())


def test_the_next_turn_is_submitted_as_soon_as_its_previous_turn_completes(tmp_path):
    """A fake engine (test only) that answers in order: with a window of 2, conversation A's turn 2 goes before C's
    turn 1, so no round waits for the other conversations' earlier turns."""
    import asyncio

    from shardgen.generate.driver import PartSink, drive
    from shardgen.engines import EngineInfo, Result
    from shardgen.generate.checkpoint import PartWriter
    from dataclasses import replace

    from shardgen.generate.turns import TurnRequest

    order = []

    class Engine:
        info = EngineInfo("fake", max_running_requests=2)

        async def generate(self, request):
            order.append(request.rid.rsplit("-a", 1)[0])
            await asyncio.sleep(0.01)
            return Result([7, 8], "ans", "stop", len(request.prompt_ids))

    def row(name, turns):
        return TurnRequest.first({"prompt_id": name, "gen_key": name, "conversation_id": name, "prompt_ids": [1, 2],
                              "messages": [{"role": "user", "content": "u1"}], "turns": turns, "max_new_tokens": 2,
                              **greedy_sampling(), "sampling_extra": "{}"})

    def follow(prompt, _row):
        nxt = prompt.next("ans", [7, 8], lambda messages, kw: [1] * (2 * len(messages)))
        return None if nxt is None else replace(nxt, gen_key=f"{prompt.conversation_id}{nxt.turn}")

    class Bar:
        def update(self, n):
            pass

    sink = PartSink(PartWriter(tmp_path / "shard-000"), 100, 30.0)
    prompts = [row("A", ["u1", "u2"]), row("B", ["u1", "u2"]), row("C", ["u1", "u2"])]
    asyncio.run(drive(Engine(), prompts, window=2, sink=sink, shard=0, attempt=1, gpu="cpu", progress=Bar(),
                      follow=follow))
    assert order.index("A2") < order.index("C") and order.index("B2") < order.index("C")
    assert len(order) == 6 and sink.committed == 6


def test_split_records_each_shards_turns_and_status_counts_against_them(multi):
    from shardgen.prompts.split import expected_turns, output_budget
    from shardgen.report.status import status

    cfg, _ = multi
    layout = Layout(cfg.results)
    build_prompts(cfg, layout.prompts_dir)
    split(layout.prompts, layout.split_dir, 2)
    # accepted: 1 + 2 + 5 turns, and the long conversation's 4 user turns (the non-alternating one is rejected)
    assert sum(expected_turns(layout.split(s)) for s in (0, 1)) == 12
    assert sum(pq.read_metadata(layout.split(s)).num_rows for s in (0, 1)) == 4
    prompts = pq.read_table(layout.prompts, columns=["max_new_tokens", "turns"]).to_pylist()
    assert sum(output_budget(layout.split(s)) for s in (0, 1)) == sum(p["max_new_tokens"] * len(p["turns"])
                                                                      for p in prompts)
    assert sorted(r["turns_expected"] for r in status(layout)) == sorted(expected_turns(layout.split(s))
                                                                        for s in (0, 1))
