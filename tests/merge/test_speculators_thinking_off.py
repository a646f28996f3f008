"""speculators' render route (`prepare-data --render-endpoint`) on messages.jsonl when the render server defaults to
`enable_thinking=false` (docs/trainers.md), with Qwen3's own tokenizer and template and speculators' own code (the
server a stand-in rendering with the model's template and that default): the benefit (no thinking-off turn trains
the empty think block) and the cost, measured on the rows docs/trainers.md counts (merge_runs.QWEN3_SCRIPT) and on
those rows plus a thinking-on answer without reasoning. Each row's context (its untrained prefix) is compared with
the prompt the model generated that turn from (the dataset's prompt_ids): the tokens in it that are the turn's own
output (generated, now context, not trained) and those the model never saw at all; docs/trainers.md quotes them."""

from difflib import SequenceMatcher

import pytest

from merge_runs import QWEN3_SCRIPT, QWEN3_THINKING_OFF, REPO, flat, scripted_run, spans

# a thinking-on turn the model answered without a think block: the server's generation prompt then holds an empty
# one the model never saw
NO_REASONING = {"think_skipped": (None, [("Quick one?", "Sure.", "stop")])}


def render_thinking_off(tokenizer):
    """vLLM's render endpoint on a server whose default template arguments hold `enable_thinking=false`."""
    def render(endpoint, messages, *, add_generation_prompt, tools=None, chat_template_kwargs=None,
               truncate_prompt_tokens=None, truncation_side=None):
        kwargs = {"enable_thinking": False, **(chat_template_kwargs or {})}
        text = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=add_generation_prompt,
                                             tokenize=False, **kwargs)
        return tokenizer(text, add_special_tokens=False).input_ids[:truncate_prompt_tokens]
    return render


def not_in(context: list[int], prompt: list[int]) -> list[int]:
    """The tokens of context that are not prompt's (in order, by difflib's matching blocks)."""
    blocks = SequenceMatcher(None, context, prompt, autojunk=False).get_matching_blocks()
    kept = {i for block in blocks for i in range(block.a, block.a + block.size)}
    return [token for i, token in enumerate(context) if i not in kept]


def contexts(run, monkeypatch, tmp_path) -> tuple[dict, int]:
    """Per changed turn (conversation name, turn) its (own output tokens moved into the context, tokens never
    seen), and the rows that train the empty think block."""
    import speculators.data_generation.preprocessing as preprocessing

    config, layout, by_name, tokenizer = run
    monkeypatch.setattr(preprocessing, "render_conversation", render_thinking_off(tokenizer))
    dataset, _ = preprocessing.load_and_preprocess_dataset(
        config.model.path, [str(layout.export("messages.jsonl"))], seq_length=4096, build_dataset_num_proc=1,
        token_freq_path=tmp_path / "freq.pt", render_endpoint="http://render.invalid")
    turns = {tuple(row["prompt_ids"]): (name, row) for name, rows in by_name.items() for row in rows}
    empty_think = tuple(tokenizer("<think>\n\n</think>\n\n", add_special_tokens=False).input_ids)
    changed, trains_empty_think = {}, 0
    for loaded in dataset:
        ids, mask = flat(loaded["input_ids"]), flat(loaded["loss_mask"])
        context, (trained,) = ids[:mask.index(1)], spans(ids, mask)
        trains_empty_think += trained[:len(empty_think)] == empty_think
        # the turn: the dataset row whose generation prompt the context starts with (the longest)
        prompt = max((p for p in turns if tuple(context[:len(p)]) == p), key=len)
        name, row = turns[prompt]
        if extra := not_in(context, list(prompt)):
            own = row["output_ids"][:len(extra)] if extra == row["output_ids"][:len(extra)] else []
            changed[(name, row["turn"])] = (tokenizer.decode(own), len(extra) - len(own))
    assert len(dataset) > 0
    return changed, trains_empty_think


@pytest.mark.parametrize("extra", [{}, NO_REASONING], ids=["readme_rows", "with_a_turn_without_reasoning"])
def test_the_thinking_off_server_changes_the_context_of_thinking_on_turns(qwen3_real_model, tmp_path, monkeypatch,
                                                                          extra):
    run = scripted_run(qwen3_real_model, tmp_path, script={**QWEN3_SCRIPT, **extra}, thinking_off=QWEN3_THINKING_OFF)
    changed, trains_empty_think = contexts(run, monkeypatch, tmp_path)
    assert trains_empty_think == 0  # the benefit: no turn trains the empty think block
    # every thinking-on turn with reasoning: its own first token, `<think>`, is context now (not trained), 0 unseen
    with_reasoning = {("think_two", 1), ("think_two", 2), ("think_cut", 1), ("think_split", 1)}
    assert {turn: changed[turn] for turn in with_reasoning} == {turn: ("<think>", 0) for turn in with_reasoning}
    quoted = " ".join(" ".join(path.read_text().split()) for path in [REPO / "README.md", *REPO.glob("docs/*.md")])
    if extra:  # a thinking-on answer without reasoning: the empty think block, context the model never saw
        own, unseen = changed.pop(("think_skipped", 1))
        assert (own, unseen) == ("", 4)
        assert f"gets the empty think block as context the model never saw ({unseen} tokens a turn)" in quoted
    assert set(changed) == with_reasoning
    moved = sum(bool(own) for own, _ in changed.values())
    assert f"the {len(with_reasoning)} thinking-on turns with reasoning each get their own first token, `<think>`, " \
           f"as context ({moved} generated tokens not trained), and no context token the model never saw" in quoted
