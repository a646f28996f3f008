"""The exports of scripted multi-turn runs (merge_runs.SCRIPT: stops, cuts by length, closed and unclosed reasoning)
under the demo model's template: the per-turn token export holds every generated token once with its exact ids;
the text exports end a conversation before a turn cut by length (or leave it out) and count it; every answer's
reasoning is apart from its content, an unclosed one flagged; the manifest names what made the tokens."""

import json

import pytest

from merge_runs import SCRIPT, scripted_run

# exports.on_length -> conversation -> turns the text exports carry (absent: left out)
TEXT_TURNS = {
    "end_conversation": {"both_stop": 2, "last_cut": 2, "unclosed_stop": 1, "plain": 1},
    "drop_conversation": {"both_stop": 2, "unclosed_stop": 1, "plain": 1},
}


def read_jsonl(path, key: str = "id") -> dict:
    return {row[key]: row for row in map(json.loads, path.read_text().splitlines())}


@pytest.fixture(scope="module", params=sorted(TEXT_TURNS))
def scripted(request, demo_model, tmp_path_factory):
    return request.param, scripted_run(demo_model, tmp_path_factory.mktemp(request.param),
                                       on_length=request.param)


def split(text: str) -> tuple[str | None, str]:
    """(reasoning_content, content) of a scripted answer, by Qwen3's layout."""
    if "</think>" not in text:
        return None, text
    reasoning, content = text.split("</think>", 1)
    return reasoning.removeprefix("<think>").strip("\n"), content.lstrip("\n")


@pytest.mark.parametrize("name", ["turns.jsonl", "turns.parquet"])
def test_every_generated_token_is_trained_once_with_its_exact_ids(scripted, name):
    from helpers import load

    _, (_, layout, by_name, _) = scripted
    rows = load(layout.export(name))
    dataset = [row for turns in by_name.values() for row in turns]
    assert len(rows) == len(dataset) == sum(len(turns) for _, turns in SCRIPT.values())
    for row in dataset:
        out = rows[f"{row['conversation_id']}#{row['turn']}"]
        assert out["input_ids"] == row["prompt_ids"] + row["output_ids"]
        assert out["loss_mask"] == [0] * len(row["prompt_ids"]) + [1] * len(row["output_ids"])
        assert {k: out[k] for k in ("conversation_id", "turn", "finish_reason", "source")} == {
            k: row[k] for k in ("conversation_id", "turn", "finish_reason", "source")}
    assert sum(sum(r["loss_mask"]) for r in rows.values()) == sum(r["completion_tokens"] for r in dataset)
    cut = rows[f"{by_name['last_cut'][2]['conversation_id']}#3"]
    assert cut["finish_reason"] == "length" and cut["input_ids"][-1] != by_name["last_cut"][0]["output_ids"][-1]


def test_text_exports_never_end_a_turn_cut_by_length(scripted):
    """Each text export carries a conversation only up to its last turn before the first cut one (or not at all)."""
    on_length, (_, layout, by_name, _) = scripted
    expected = TEXT_TURNS[on_length]
    cid = {by_name[name][0]["conversation_id"]: name for name in by_name}
    messages = {cid[k]: r for k, r in read_jsonl(layout.export("messages.jsonl")).items()}
    sharegpt = {cid[k]: r for k, r in read_jsonl(layout.export("sharegpt.jsonl")).items()}
    assert {n: sum(m["role"] == "assistant" for m in r["conversations"]) for n, r in messages.items()} == expected
    assert {n: sum(m["from"] == "gpt" for m in r["conversations"]) for n, r in sharegpt.items()} == expected
    for name, turns in expected.items():
        answers = [split(row["completion"]) for row in by_name[name][:turns]]
        assert [(m["reasoning_content"], m["content"]) for m in messages[name]["conversations"]
                if m["role"] == "assistant"] == answers
        assert [m["value"] for m in sharegpt[name]["conversations"] if m["from"] == "gpt"] == [
            row["completion"] for row in by_name[name][:turns]]  # ShareGPT has no reasoning field: the whole text
    train = {cid[r["prompt_id"]]: r for r in map(json.loads, layout.train.read_text().splitlines())}
    # one row per conversation: sharegpt.jsonl's rows with the dataset's prompt_id and source
    assert {n: {k: r[k] for k in ("system", "conversations")} for n, r in train.items()} == \
        {n: {k: r[k] for k in ("system", "conversations")} for n, r in sharegpt.items()}
    assert {r["source"] for r in train.values()} == {"scripted"}
    manifest = json.loads(layout.export("manifest.json").read_text())["text_exports"]
    assert manifest == {
        "on_length": on_length, "reasoning_tags": ["<think>", "</think>"], "conversations": 5, "turns": 9,
        "turns_cut_by_length": 2, "turns_stopped_on_other_token": 0, "text_turns_left_out": 9 - sum(expected.values()),
        "text_conversations_left_out": 5 - len(expected),
        "text_conversations_ended_early": int(on_length == "end_conversation"),
        "answers_with_reasoning": 5, "answers_reasoning_unclosed": 2,
        "reasoning_rows": 2 if on_length == "end_conversation" else 1}


def test_reasoning_is_apart_in_the_dataset_and_the_history_fed_back_is_unchanged(scripted):
    _, (_, _, by_name, _) = scripted
    for name, (_, turns) in SCRIPT.items():
        for row, (_, text, _) in zip(by_name[name], turns, strict=True):
            reasoning, content = split(text)
            assert row["completion"] == text  # the whole completion, as generated
            assert (row["reasoning_content"], row["content"]) == (reasoning, content)
            assert row["reasoning_unclosed"] == ("<think>" in text and "</think>" not in text)
        for earlier, row in zip(by_name[name], by_name[name][1:]):  # the next turn was fed the whole text
            assert row["messages"][-2] == {"role": "assistant", "content": earlier["completion"]}
    assert by_name["unclosed_stop"][0]["reasoning_content"] is None  # flagged, not split
    assert by_name["unclosed_stop"][0]["content"] == SCRIPT["unclosed_stop"][1][0][1]


def test_reasoning_export_holds_conversations_whose_every_answer_reasoned(scripted):
    on_length, (_, layout, by_name, _) = scripted
    rows = read_jsonl(layout.export("reasoning.jsonl"))
    names = {"both_stop", "last_cut"} if on_length == "end_conversation" else {"both_stop"}
    assert set(rows) == {by_name[name][0]["conversation_id"] for name in names}
    assert all(r["status"] == "success" for r in rows.values())


def test_without_reasoning_tags_nothing_is_split(demo_model, tmp_path):
    _, layout, by_name, _ = scripted_run(demo_model, tmp_path, model={"reasoning_tags": None})
    for row in (row for turns in by_name.values() for row in turns):
        assert (row["reasoning_content"], row["content"], row["reasoning_unclosed"]) == (None, row["completion"], False)
    assert layout.export("reasoning.jsonl").read_text() == ""


def test_the_manifest_names_what_made_the_tokens(scripted):
    _, (config, layout, _, _) = scripted
    from shardgen.merge.provenance import provenance
    from shardgen.model.target import ModelInfo

    manifest = json.loads(layout.export("manifest.json").read_text())
    assert manifest["model"]["template"] == ModelInfo.from_config(config.model).fingerprint["template"]
    assert manifest["engines_per_shard"] == {
        "0": {"backend": "scripted", "weights": None, "kv": None, "ssm_state": None,
              "dtypes_note": "weights, kv, ssm_state: not recorded by this engine"}}
    assert manifest["model"]["model_hash_covers"].startswith("sha256 over config.json")
    from_model = {"temperature": "generation_config", "top_p": "generation_config", "top_k": "generation_config",
                  "min_p": "neutral", "repetition_penalty": "neutral"}  # the demo model's generation_config.json
    assert manifest["sampling_per_source"] == {"scripted": [{"max_new_tokens": 24, "temperature": 0.6, "top_p": 0.95,
                                                             "top_k": 20, "min_p": 0.0, "repetition_penalty": 1.0,
                                                             "origin": from_model}]}
    assert {k: manifest[k] for k in ("model", "engines_per_shard", "sampling_per_source")} == provenance(config, layout)


@pytest.mark.parametrize("args, expected", [
    ({}, {"weights": "bfloat16", "kv": "bfloat16", "ssm_state": "float32", "attention_backend": None}),
    ({"mamba_ssm_dtype": "bfloat16", "kv_cache_dtype": "fp8_e4m3", "attention_backend": "fa3"},
     {"weights": "bfloat16", "kv": "fp8_e4m3", "ssm_state": "bfloat16", "attention_backend": "fa3"})])
def test_sglang_numerics_are_read_from_the_done_files_engine(demo_model, args, expected):
    from shardgen.merge.provenance import engine_numerics

    engine = {"backend": "sglang", "version": "0.5.17", "max_running_requests": 256,
              "server_args": {"dtype": "bfloat16", **args},
              "resolved": {}, "gpu_name": "NVIDIA H200"}
    assert engine_numerics(engine, demo_model) == {"backend": "sglang", "version": "0.5.17", **expected,
                                                   "gpu_name": "NVIDIA H200"}
