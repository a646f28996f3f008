import json

import pyarrow.parquet as pq
import pytest

from shardgen.keys import prompt_id
from shardgen.model.target import ModelError, ModelInfo
from shardgen.prompts.stage import build_prompts

from helpers import run

Q = "Janet has 3 apples and buys 2 more. How many apples does she have?"


def test_dedupe_keeps_the_first_source_in_config_order(make_config, write_jsonl, tmp_path):
    a = write_jsonl("a.jsonl", [{"query": Q, "response": "5"}, {"query": "Other?", "response": "x"}])
    b = write_jsonl("b.jsonl", [{"question": f"  {Q}\n", "answer": "five"}, {"question": Q, "answer": "5!"}])
    config = make_config([{"name": "first", "path": a, "format": "query_response", "sampling": {"max_new_tokens": 20}},
                          {"name": "second", "path": b, "format": "question_answer"}])
    counts, read = run(config, tmp_path)
    kept = [p for p in read["prompts"] if p["prompt_id"] == prompt_id([{"role": "user", "content": Q}])]
    assert len(kept) == 1 and kept[0]["source"] == "first"
    assert kept[0]["max_new_tokens"] == 20 and kept[0]["reference"] == "5"  # the keeper's params and reference
    assert [(d["source"], d["source_row"], d["kept_source"]) for d in read["duplicates"]] == [
        ("second", 0, "first"), ("second", 1, "first")]  # whitespace does not make a new prompt
    assert counts == {"first": {"read": 2, "rejected": 0, "duplicates": 0},
                      "second": {"read": 2, "rejected": 0, "duplicates": 2}}


def test_rows_read_balance_and_every_rejection_reason(make_config, write_jsonl, tmp_path):
    rows = [{"query": Q}, '{"query": "broken"', '"just a string"', {"response": "no query"}, {"query": 7},
            {"query": "   "}, {"query": "nul\u0000byte"}, {"query": "word " * 600}]
    path = write_jsonl("m.jsonl", rows)
    chat = write_jsonl("c.jsonl", [{"conversations": [{"from": "gpt", "value": "hi"}]},
                                   {"conversations": [{"from": "observation", "value": "x"}]}])
    config = make_config([{"name": "m", "path": path, "format": "query_response"},
                          {"name": "c", "path": chat, "format": "sharegpt"}])
    counts, read = run(config, tmp_path)
    reasons = sorted(r["reason"] for r in read["rejected"])
    assert reasons == sorted(["unreadable", "not_object", "missing_field", "wrong_type", "empty_prompt",
                              "invalid_text", "too_long", "no_user_turn", "unknown_role"])
    too_long = next(r for r in read["rejected"] if r["reason"] == "too_long")
    assert too_long["source_row"] == 7 and "context_length 512" in too_long["detail"]
    for source in ("m", "c"):
        accepted = sum(p["source"] == source for p in read["prompts"])
        assert counts[source]["read"] == accepted + counts[source]["rejected"] + counts[source]["duplicates"]


def test_prompt_row_contract(make_config, write_jsonl, tmp_path, demo_model):
    path = write_jsonl("s.jsonl", [{"conversations": [
        {"from": "system", "value": "old"}, {"from": "human", "value": "Hello there"},
        {"from": "gpt", "value": "Hi"}, {"from": "human", "value": "More"}, {"from": "gpt", "value": "Ok"}]}])
    config = make_config([{"name": "s", "path": path, "format": "sharegpt", "system_prompt": "Be kind.",
                           "chat_template_kwargs": {"enable_thinking": False}}])
    _, read = run(config, tmp_path)
    row = read["prompts"][0]
    model = ModelInfo.from_config(config.model)
    assert row["messages"] == [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hello there"}]
    assert row["prompt_ids"] == model.encode(row["messages"], {"enable_thinking": False})
    assert row["prompt_tokens"] == len(row["prompt_ids"])
    assert row["dropped_turns"] == 2 and row["reference"] == "Hi"
    assert json.loads(row["sampling_extra"]) == {"chat_template_kwargs": {"enable_thinking": False}}
    assert read["sources"][0]["system_replaced"] == 1 and read["sources"][0]["rows_read"] == 1


def test_stop_ids_are_eos_plus_end_of_turn(demo_model):
    model = ModelInfo(demo_model)
    im_end = model.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert model.stop_token_ids == sorted({2, im_end})


def test_a_model_without_chat_template_fails_clearly(demo_model, tmp_path):
    folder = tmp_path / "no-template"
    folder.mkdir()
    for f in demo_model.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    del cfg["chat_template"]
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelError, match="no chat template: set model.chat_template"):
        ModelInfo(folder).stop_token_ids
    assert ModelInfo(folder, chat_template="{{ messages[0]['content'] }}").template


def many_rows_config(make_config, write_jsonl, tmp_path):
    """Two sources with duplicates inside one source, across sources and across chunks, and rejections."""
    a = [{"query": f"Question {i % 40}: how much is {i % 40} + 1?", "response": str(i)} for i in range(90)]
    a[5], a[17], a[33] = {"query": "   "}, '{"broken', {"query": "word " * 600}
    b = [{"question": f"Question {i}: how much is {i} + 1?", "answer": "b"} for i in range(30, 70)]
    b[3] = {"question": None}
    return make_config([{"name": "a", "path": write_jsonl("a.jsonl", a), "format": "query_response"},
                        {"name": "b", "path": write_jsonl("b.jsonl", b), "format": "question_answer"}])


def test_any_number_of_workers_writes_byte_identical_files(make_config, write_jsonl, tmp_path, monkeypatch):
    from shardgen.prompts import stage as prompts, sources

    monkeypatch.setattr(sources, "CHUNK_ROWS", 7)  # many chunks: duplicates fall in other chunks and workers
    monkeypatch.setattr(prompts, "ROW_GROUP_ROWS", 16)
    config = many_rows_config(make_config, write_jsonl, tmp_path)
    counts = {w: build_prompts(config, tmp_path / f"w{w}", workers=w) for w in (1, 3)}
    assert counts[1] == counts[3] == {"a": {"read": 90, "rejected": 3, "duplicates": 47},
                                      "b": {"read": 40, "rejected": 1, "duplicates": 9}}
    for name in ("prompts", "rejected", "duplicates", "sources"):
        assert (tmp_path / "w1" / f"{name}.parquet").read_bytes() == (tmp_path / "w3" / f"{name}.parquet").read_bytes()
    kept = pq.read_table(tmp_path / "w3" / "prompts.parquet").to_pylist()
    assert [(p["source"], p["source_row"]) for p in kept] == \
        [("a", i) for i in range(40) if i not in (5, 17, 33)] + [("a", 45), ("a", 57), ("a", 73)] + \
        [("b", i) for i in range(10, 40)]  # first occurrence in source order wins
    duplicates = pq.read_table(tmp_path / "w3" / "duplicates.parquet").to_pylist()
    assert [d["source_row"] for d in duplicates if d["source"] == "b"] == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    assert {d["kept_source"] for d in duplicates} == {"a"}
    rejected = pq.read_table(tmp_path / "w3" / "rejected.parquet").to_pylist()
    assert [(r["source"], r["source_row"], r["reason"]) for r in rejected] == [
        ("a", 5, "empty_prompt"), ("a", 17, "unreadable"), ("a", 33, "too_long"), ("b", 3, "missing_field")]


@pytest.mark.parametrize("fault, workers", [("tokenizer_error", 1), ("tokenizer_error", 3), ("tokenizer_kill", 2)])
def test_a_row_that_crashes_the_tokenizer_stops_the_stage_naming_it(fault, workers, make_config, write_jsonl,
                                                                    tmp_path, monkeypatch):
    from shardgen.prompts import sources
    from shardgen.prompts.rows import PromptsError

    monkeypatch.setattr(sources, "CHUNK_ROWS", 7)
    config = many_rows_config(make_config, write_jsonl, tmp_path)
    monkeypatch.setenv("SHARDGEN_FAULT", f"{fault}:Question 52:")  # source b, row 22
    with pytest.raises(PromptsError, match=r"source 'b' row 22\b"):
        build_prompts(config, tmp_path / "prompts", workers=workers)
    assert not list((tmp_path / "prompts").iterdir())  # no prompts.parquet, no partial temp file


def test_rejected_and_duplicate_rows_carry_their_own_id(make_config, write_jsonl, tmp_path):
    turn = lambda text: {"conversations": [{"from": "human", "value": text}]}  # noqa: E731
    path = write_jsonl("s.jsonl", [{"id": "a-1", **turn("Hi?")}, {"id": 7, **turn("Hi?")}, {"id": "a-3", **turn(" ")},
                                   {"id": "a-4", **turn("word " * 600)}, turn("  ")])
    _, read = run(make_config([{"name": "s", "path": path, "format": "sharegpt"}]), tmp_path)
    assert [(d["source_row"], d["id"]) for d in read["duplicates"]] == [(1, "7")]
    assert [(r["source_row"], r["reason"], r["id"]) for r in read["rejected"]] == [
        (2, "empty_prompt", "a-3"), (3, "too_long", "a-4"), (4, "empty_prompt", None)]


def test_listed_sampling_gives_each_prompt_one_value_by_its_prompt_id(make_config, write_jsonl, tmp_path,
                                                                      monkeypatch):
    """A source's `temperature`/`top_p`/`top_k` may be lists: each prompt gets one value of each, chosen from its
    prompt_id, so the same prompt gets the same value on every run, whatever the workers or the row order."""
    from shardgen.prompts import sources

    monkeypatch.setattr(sources, "CHUNK_ROWS", 5)  # several chunks, so two workers split the rows
    questions = [{"query": f"What is {i} times {i}?"} for i in range(24)]
    sampling = {"temperature": [0.2, 0.9], "top_p": [0.5, 0.8, 1.0], "top_k": [5, 50]}
    path = write_jsonl("a.jsonl", questions)
    config = make_config([{"name": "a", "path": path, "format": "query_response", "sampling": sampling}])
    runs = [build_prompts(config, tmp_path / f"w{w}", workers=w) and
            pq.read_table(tmp_path / f"w{w}" / "prompts.parquet").to_pylist() for w in (1, 2)]
    build_prompts(config, tmp_path / "again", workers=1)
    assert (tmp_path / "again" / "prompts.parquet").read_bytes() == (tmp_path / "w1" / "prompts.parquet").read_bytes()
    values = [{r["prompt_id"]: (r["temperature"], r["top_p"], r["top_k"]) for r in rows} for rows in runs]
    assert values[0] == values[1] and len(values[0]) == 24
    assert {t for t, _, _ in values[0].values()} == {0.2, 0.9}
    assert {p for _, p, _ in values[0].values()} == {0.5, 0.8, 1.0}
    assert {k for _, _, k in values[0].values()} == {5, 50}
    assert {r["max_new_tokens"] for r in runs[0]} == {config.defaults.max_new_tokens}

    # Another row order (reversed, in another source file): every prompt keeps its value.
    reordered = make_config([{"name": "a", "path": write_jsonl("b.jsonl", questions[::-1]), "format": "query_response",
                              "sampling": sampling}])
    _, read = run(reordered, tmp_path / "reordered")
    assert {r["prompt_id"]: (r["temperature"], r["top_p"], r["top_k"]) for r in read["prompts"]} == values[0]

    # A changed list changes every gen_key (the list is in it); the same prompts, the same ids.
    changed = make_config([{"name": "a", "path": path, "format": "query_response",
                            "sampling": {**sampling, "temperature": [0.2, 0.9, 0.5]}}])
    _, read = run(changed, tmp_path / "changed")
    keys = {r["prompt_id"]: r["gen_key"] for r in runs[0]}
    assert {r["prompt_id"] for r in read["prompts"]} == set(keys)
    assert all(keys[r["prompt_id"]] != r["gen_key"] for r in read["prompts"])


@pytest.mark.parametrize("key, value, where, message", [
    ("temperature", [], "temperature", "should be non-empty"),
    ("temperature", "0.7", "temperature", "is not of type 'number', 'array'"),
    ("top_k", [5, "x"], r"top_k\[1\]", "is not of type 'integer'"),
    ("top_p", [0.5, 2], r"top_p\[1\]", "is greater than the maximum")])
def test_a_bad_sampling_list_fails_validation_naming_the_key(make_config, key, value, where, message):
    from shardgen.config.schema import ConfigError

    with pytest.raises(ConfigError, match=rf"sources\[0\]\.sampling\.{where}: .*{message}"):
        make_config([{"name": "a", "path": "a.jsonl", "format": "query_response", "sampling": {key: value}}])
