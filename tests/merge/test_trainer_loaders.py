"""The trainers' own loading code on the exports of multi-turn runs (merge_runs.SCRIPT: stops, cuts by length,
reasoning, scripted under the demo model's template and a Qwen3-style one; and the demo's real CPU engine):
SpecForge 0.2.0 (`data.prompts_path`: specforge/data/prompt_builder.py::prepare_prompt_tasks; `data.train_data_path`:
specforge/data/preprocessing.py::build_eagle3_dataset; scripts/expand_reasoning_conversations.py, copied in
specforge_scripts/) and speculators 0.9.0 (`prepare_data --data`:
speculators/data_generation/preprocessing.py::load_and_preprocess_dataset). Token exports load with shardgen's exact
ids and masks; under the settings docs/trainers.md recommends, the text exports train no token the model did not
generate. The packages come from the README's test set-up (`pip install --no-deps specforge==0.2.0
speculators==0.9.0`): without them these tests fail, they are never skipped."""

import json
from collections import Counter

import pytest

from merge_runs import CHATML, QWEN3_SCRIPT, QWEN3_THINKING_OFF, expand_reasoning, register, scripted_run, spans

# merge_runs.CHATML is what docs/trainers.md recommends for SpecForge's train_data_path: the model's end-of-turn token
# without the newline the built-in Qwen templates append (and train), and no default system prompt where a
# conversation had none.


@pytest.fixture(scope="module")
def demo_run(demo_model, tmp_path_factory):
    return scripted_run(demo_model, tmp_path_factory.mktemp("demo"))


@pytest.fixture(scope="module")
def qwen3_run(qwen3_model, tmp_path_factory):
    return scripted_run(qwen3_model, tmp_path_factory.mktemp("qwen3"))


@pytest.fixture(scope="module")
def demo_engine_run(demo_model, tmp_path_factory):
    """The same conversations answered by the demo's real CPU engine: ids as a model generates them."""
    return scripted_run(demo_model, tmp_path_factory.mktemp("engine"), scripted=False)


@pytest.fixture(scope="module")
def qwen3_real_run(qwen3_real_model, tmp_path_factory):
    """Qwen3's own tokenizer and template, thinking on and off, a stop on <|endoftext|> (merge_runs.QWEN3_SCRIPT)."""
    return scripted_run(qwen3_real_model, tmp_path_factory.mktemp("qwen3-real"), script=QWEN3_SCRIPT,
                        thinking_off=QWEN3_THINKING_OFF)


@pytest.fixture(scope="module", params=["demo_run", "qwen3_run", "demo_engine_run", "qwen3_real_run"])
def any_run(request):
    return request.getfixturevalue(request.param)


def token_rows(layout, name: str) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    rows = [json.loads(line) for line in layout.export(name).read_text().splitlines()]
    return [(tuple(r["input_ids"]), tuple(r["loss_mask"])) for r in rows]


@pytest.mark.parametrize("name", ["turns.jsonl", "tokens.jsonl"])
def test_specforge_prompts_path_loads_the_token_exports_exactly(any_run, name):
    from specforge.data.prompt_builder import prepare_prompt_tasks

    _, layout, _, tokenizer = any_run
    tasks = prepare_prompt_tasks(layout.export(name), tokenizer, chat_template=None, max_length=4096,
                                 is_preformatted=False, train_only_last_turn=False, cache_dir=None, cache_key=None,
                                 num_proc=None)
    loaded = [(tuple(t["payload"]["input_ids"]), tuple(t["payload"]["loss_mask"])) for t in tasks]
    assert loaded == token_rows(layout, name)  # every row, in order, ids and mask as written


@pytest.mark.parametrize("name", ["turns.jsonl", "tokens.jsonl"])
def test_speculators_prepare_data_loads_the_token_exports_exactly(any_run, name, tmp_path):
    from speculators.data_generation.preprocessing import load_and_preprocess_dataset

    config, layout, _, _ = any_run
    dataset, _ = load_and_preprocess_dataset(config.model.path, [str(layout.export(name))], seq_length=4096,
                                             build_dataset_num_proc=1, token_freq_path=tmp_path / "freq.pt")
    loaded = [(tuple(r["input_ids"].tolist()), tuple(r["loss_mask"].tolist())) for r in dataset]
    assert sorted(loaded) == sorted(token_rows(layout, name))  # it shuffles; nothing else changes
    assert [r["seq_len"] for r in dataset] == [len(ids) for ids, _ in loaded]


def test_the_per_turn_export_trains_every_generated_token_once(any_run):
    _, layout, by_name, _ = any_run
    trained = Counter(span for ids, mask in token_rows(layout, "turns.jsonl") for span in spans(ids, mask))
    assert trained == Counter(tuple(row["output_ids"]) for rows in by_name.values() for row in rows)


def test_specforge_train_data_path_trains_only_generated_tokens(demo_run):
    """messages.jsonl under the recommended template: a trained stretch per carried assistant turn, each the tail of
    the ids generated for it (its visible answer and end-of-turn token; the reasoning, apart, is not rendered by a
    general template), none for a turn cut by length."""
    from datasets import load_dataset
    from specforge.data.preprocessing import build_eagle3_dataset

    _, layout, by_name, tokenizer = demo_run
    dataset = build_eagle3_dataset(load_dataset("json", data_files=str(layout.export("messages.jsonl")),
                                                split="train"),
                                   tokenizer, chat_template=register("shardgen-chatml", **CHATML), max_length=4096,
                                   num_proc=None)
    trained = Counter(span for row in dataset for span in spans(row["input_ids"], row["loss_mask"]))
    expected = Counter()
    carried = {"both_stop": 2, "last_cut": 2, "unclosed_stop": 1, "plain": 1}  # exports.on_length's default
    for name, turns in carried.items():
        assert len(by_name[name]) >= turns, name
        for row in by_name[name][:turns]:
            assert row["finish_reason"] == "stop"
            answer = tuple(tokenizer(row["content"], add_special_tokens=False).input_ids) + (row["output_ids"][-1],)
            assert answer == tuple(row["output_ids"][-len(answer):])  # what the model generated
            expected[answer] += 1
    assert trained == expected


def test_specforge_reasoning_route_trains_each_turn_as_generated(qwen3_run, tmp_path, monkeypatch):
    """reasoning.jsonl through SpecForge's expand_reasoning_conversations.py (no row skipped) and build_eagle3_dataset
    with a thinking parser and train_only_last_turn: each event trains exactly the ids generated for its turn, the
    Qwen3-style template laying out the last turn's reasoning as the model wrote it."""
    from datasets import load_dataset
    from specforge.data.preprocessing import build_eagle3_dataset

    _, layout, by_name, tokenizer = qwen3_run
    expanded, skipped = expand_reasoning(layout.export("reasoning.jsonl"), tmp_path, monkeypatch)
    assert skipped.read_text() == ""
    template = register("shardgen-qwen3-thinking", **CHATML, parser_type="thinking")
    dataset = build_eagle3_dataset(load_dataset("json", data_files=str(expanded), split="train"), tokenizer,
                                   chat_template=template, max_length=4096, num_proc=None, train_only_last_turn=True)
    trained = Counter(span for row in dataset for span in spans(row["input_ids"], row["loss_mask"]))
    assert trained == Counter(tuple(row["output_ids"]) for name in ("both_stop", "last_cut")
                              for row in by_name[name][:2])
    assert len(dataset) == 4  # one event per assistant turn of both_stop and last_cut (ended before its cut turn)


@pytest.mark.parametrize("name", ["turns", "tokens"])
def test_the_parquet_token_exports_are_the_jsonl_rows_for_datasets(qwen3_real_run, name):
    """The .parquet token exports are for DuckDB and `datasets` (neither trainer reads parquet: SpecForge reads
    prompts_path as JSON lines, speculators takes .json/.jsonl only): the same rows as the .jsonl."""
    from datasets import load_dataset

    _, layout, _, _ = qwen3_real_run
    loaded = load_dataset("parquet", data_files=str(layout.export(f"{name}.parquet")), split="train")
    assert sorted((tuple(r["input_ids"]), tuple(r["loss_mask"])) for r in loaded) == \
        sorted(token_rows(layout, f"{name}.jsonl"))
