"""The exports: each loads with datasets.load_dataset as it is; the per-turn token export has a row per generated
turn with its exact ids; the conversation-level ones a row per conversation, the regenerated answers in place of
the originals, and a token export whose loss mask is checked against the demo model's chat template; text exports
end a conversation before a turn cut by length (exports.on_length) and carry reasoning apart (model.reasoning_tags)."""

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shardgen.store import tables
from shardgen.generate import checkpoint
from shardgen.merge.exports import EXPORTS, write_exports
from shardgen.layout import Layout

from helpers import CONVERSATIONS, TURN_COLUMNS, render, end_of_turn, dataset_rows, load


@pytest.fixture(scope="module")
def tokenizer(demo_model):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(demo_model)


def export_rows(root, rows) -> Layout:
    layout = Layout(root)
    schema = pa.schema(list(tables.DATASET) + [pa.field(n, t) for n, t in TURN_COLUMNS])
    layout.dataset.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows[::-1], schema=schema), layout.dataset)  # turns out of order on disk
    write_exports(checkpoint.connect(layout), layout)
    assert all(layout.export(name).is_file() for name in EXPORTS)
    return layout


def read_jsonl(path: Path, key: str = "id") -> dict:
    """Rows by id; an empty file (every conversation left out) is no rows (datasets refuses to load one)."""
    return {row[key]: row for row in map(json.loads, path.read_text().splitlines())}


def without_reasoning(conversation: list[dict]) -> list[dict]:
    """messages.jsonl's messages with no reasoning in them, as {role, content}."""
    assert all(m["reasoning_content"] is None for m in conversation)
    return [{"role": m["role"], "content": m["content"]} for m in conversation]


@pytest.fixture(scope="module")
def exported(tmp_path_factory, tokenizer):
    rows = dataset_rows(tokenizer)
    return export_rows(tmp_path_factory.mktemp("exports") / "results", rows), rows


def test_sharegpt_has_the_regenerated_turns_and_a_top_level_system(exported):
    layout, _ = exported
    rows = load(layout.export("sharegpt.jsonl"))
    assert set(rows) == set(CONVERSATIONS)
    for cid, (system, turns) in CONVERSATIONS.items():
        row = rows[cid]
        assert set(row) == {"id", "system", "conversations"} and row["system"] == system
        expected = [m for user, answer, _ in turns for m in ({"from": "human", "value": user},
                                                             {"from": "gpt", "value": answer})]
        assert row["conversations"] == expected  # alternating, human first, gpt last; no original answer


def test_messages_are_the_conversation_regeneration_rendered(exported, tokenizer):
    layout, rows = exported
    exported_rows = load(layout.export("messages.jsonl"))
    assert set(exported_rows) == set(CONVERSATIONS)
    by_turn = {(r["conversation_id"], r["turn"]): r for r in rows}
    for cid, (system, turns) in CONVERSATIONS.items():
        row = exported_rows[cid]
        assert set(row) == {"id", "conversations"}  # SpecForge hands any other column to the template
        conversation = without_reasoning(row["conversations"])
        assert [m["role"] for m in conversation] == ["system"] * bool(system) + ["user", "assistant"] * len(turns)
        offset = 1 if system else 0
        for t in range(1, len(turns) + 1):
            prefix = conversation[:offset + 2 * t - 1]  # system, ..., user t
            assert prefix == by_turn[cid, t]["messages"]
            assert render(tokenizer, prefix) == by_turn[cid, t]["prompt_ids"]  # the system turn regeneration used
            assert conversation[offset + 2 * t - 1]["content"] == turns[t - 1][1]


@pytest.mark.parametrize("name", ["tokens.jsonl", "tokens.parquet"])
def test_token_loss_mask_is_one_exactly_on_the_last_generation(exported, tokenizer, name):
    """Rule for earlier assistant spans: 0. In the last prompt they are re-rendered text (a template may strip their
    reasoning, re-tokenizing may split them otherwise), not the tokens the model generated."""
    layout, rows = exported
    tokens = load(layout.export(name))
    conversations = load(layout.export("messages.jsonl"))
    last = {}
    for r in rows:
        if r["turn"] > last.get(r["conversation_id"], {"turn": 0})["turn"]:
            last[r["conversation_id"]] = r
    assert set(tokens) == set(CONVERSATIONS)
    for cid, row in tokens.items():
        ids, mask = row["input_ids"], row["loss_mask"]
        assert set(row) == {"id", "input_ids", "loss_mask"} and len(ids) == len(mask) and set(mask) <= {0, 1}
        assert all(type(v) is int for v in ids + mask)  # SpecForge rejects bools
        conversation = without_reasoning(conversations[cid]["conversations"])
        cut = mask.index(1)
        assert mask == [0] * cut + [1] * (len(mask) - cut)
        # the unsupervised part is the template applied to the conversation up to its last user turn
        assert ids[:cut] == render(tokenizer, conversation[:-1]) == last[cid]["prompt_ids"]
        # the supervised part is what the model generated: the last answer and its end-of-turn token
        assert ids[cut:] == last[cid]["output_ids"] and ids[-1] == end_of_turn(tokenizer)
        assert tokenizer.decode(ids[cut:], skip_special_tokens=True) == conversation[-1]["content"]
        # and it is the last assistant span of the whole conversation's render: the template's own boundary
        whole = render(tokenizer, conversation, generation_prompt=False)
        assert whole[:len(ids)] == ids
        assert tokenizer.decode(whole[len(ids):]) == "\n"
        # earlier regenerated answers are inside the prompt, masked 0
        prompt_text = tokenizer.decode(ids[:cut])
        for m in conversation[:-1]:
            if m["role"] == "assistant":
                assert m["content"] in prompt_text


# Qwen3's rule on the demo vocabulary: an assistant turn before the last user turn loses its reasoning (the text up to
# </think> and the newlines after it); later ones keep it.
QWEN3_LIKE = (
    "{% set ns = namespace(last_user=0) %}{% for m in messages %}{% if m['role'] == 'user' %}"
    "{% set ns.last_user = loop.index0 %}{% endif %}{% endfor %}"
    "{% for m in messages %}{% set content = m['content'] %}"
    "{% if m['role'] == 'assistant' and loop.index0 < ns.last_user and '</think>' in content %}"
    "{% set content = content.split('</think>')[-1].lstrip('\\n') %}{% endif %}"
    "<|im_start|>{{ m['role'] }}\n{{ content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def test_earlier_answers_are_masked_because_a_template_may_rerender_them(tmp_path, demo_model):
    """Under a template that strips history reasoning the ids generated for turn 1 are not in turn 2's prompt at
    all: finding earlier spans is impossible, and the 0 rule still gives the last generation exactly."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(demo_model)
    tokenizer.chat_template = QWEN3_LIKE
    first = "<think>\nthe user wants a colour\n</think>\n\nBlue."
    last = "<think>\nanother one\n</think>\n\nGreen."
    rows = dataset_rows(tokenizer, {"q": (None, [("Name a colour.", first, "red"), ("Another?", last, "teal")])})
    layout = export_rows(tmp_path / "results", rows)
    row = load(layout.export("tokens.jsonl"))["q"]
    ids, mask = row["input_ids"], row["loss_mask"]
    cut = mask.index(1)
    generated_first = rows[0]["output_ids"]
    assert not any(ids[i:i + len(generated_first)] == generated_first for i in range(len(ids)))
    prompt_text = tokenizer.decode(ids[:cut])
    assert "Blue." in prompt_text and "the user wants" not in prompt_text  # re-rendered, reasoning gone
    assert ids[cut:] == rows[1]["output_ids"] and sum(mask) == len(rows[1]["output_ids"])
    conversation = load(layout.export("messages.jsonl"))["q"]["conversations"]
    assert ids[:cut] == render(tokenizer, conversation[:-1])  # the history's visible answers, as the template left them
    assert [(m["content"], m["reasoning_content"]) for m in conversation if m["role"] == "assistant"] == [
        ("Blue.", "the user wants a colour"), ("Green.", "another one")]  # each turn's reasoning apart


def test_merge_writes_the_exports_of_a_demo_run(make_config, write_jsonl, tokenizer, monkeypatch):
    """A first-turn run's rows: each a one-turn conversation in the token exports, and in the text exports and
    train.jsonl when it stopped. The engine is a test-only fake over the demo tokenizer that stops on even fruit
    numbers and is cut by length on odd ones (the demo model's random answers are nearly always cut)."""
    from shardgen.merge.dataset import merge
    from helpers import FakeEngine, stage

    class StopOnEven(FakeEngine):
        def reply(self, prompt):
            even = int(prompt.split("fruit number ")[1].split(".")[0]) % 2 == 0
            return ("A pear.", "stop") if even else ("An apple and", "length")

    engine = StopOnEven("fake-stop-on-even", tokenizer, max_running_requests=2)
    monkeypatch.setattr("shardgen.engines.session.create_engine", lambda *args, **kwargs: engine)
    path = write_jsonl("a.jsonl", [{"query": f"Name a fruit number {i}."} for i in range(5)])
    layout = stage(make_config([{"name": "a", "path": path, "format": "query_response"}]), 1)
    ds = layout.dataset_dir
    merge(layout, ds / "data.parquet", ds / "train.jsonl", layout.root / "merge" / "failed.parquet")
    dataset = {r["prompt_id"]: r for r in pq.read_table(ds / "data.parquet").to_pylist()}
    ids = {r.get("conversation_id", r["prompt_id"]): r for r in dataset.values()}
    stopped = {cid for cid, r in ids.items() if r["finish_reason"] == "stop"}
    assert (len(ids), len(stopped)) == (5, 3)  # fruits 0, 2 and 4 stopped; 1 and 3 were cut
    sharegpt, messages = read_jsonl(layout.export("sharegpt.jsonl")), read_jsonl(layout.export("messages.jsonl"))
    for name in ("tokens.jsonl", "tokens.parquet"):
        tokens = load(layout.export(name))
        assert set(tokens) == set(ids)
        for cid, r in ids.items():
            assert tokens[cid]["input_ids"] == r["prompt_ids"] + r["output_ids"]
            assert sum(tokens[cid]["loss_mask"]) == len(r["output_ids"])
    assert set(sharegpt) == set(messages) == stopped
    for cid in stopped:
        r = ids[cid]
        assert without_reasoning(messages[cid]["conversations"]) == r["messages"] + [
            {"role": "assistant", "content": r["completion"]}]
        assert sharegpt[cid]["conversations"][-1] == {"from": "gpt", "value": r["completion"]}
    assert sorted(t["prompt_id"] for t in read_jsonl(layout.train, key="prompt_id").values()) == sorted(stopped)


def test_shardgen_merge_writes_the_sidecar_manifest(make_config, write_jsonl):
    """What the rows were rendered with, beside them (not in row fields, which SpecForge hands to the template)."""
    from shardgen.cli import main
    from helpers import stage

    path = write_jsonl("a.jsonl", [{"query": f"Name a tree number {i}."} for i in range(3)])
    config = make_config([{"name": "a", "path": path, "format": "query_response", "system_prompt": "Be kind."}])
    layout = stage(config, 1)
    ds = layout.dataset_dir
    assert main(["--config", str(config.write_resolved()), "merge", "--dataset", str(ds / "data.parquet"),
                 "--train", str(ds / "train.jsonl"), "--failed", str(layout.failed)]) == 0
    record = json.loads(layout.exports_manifest.read_text())
    assert record["sources"]["a"]["system_prompt"] == "Be kind." and len(record["model"]["template"]) == 64
    assert sorted(Path(p).name for p in record["files"]) == sorted(EXPORTS)
    conversations = read_jsonl(layout.export("messages.jsonl"))
    assert all(r["conversations"][0] == {"role": "system", "content": "Be kind.", "reasoning_content": None}
               for r in conversations.values())
    assert all(r["system"] == "Be kind." for r in read_jsonl(layout.export("sharegpt.jsonl")).values())
