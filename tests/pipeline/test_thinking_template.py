"""Thinking models under `multi_turn: each_turn`, against a Qwen3-style chat template on the demo tokenizer: the
completion text goes back as the assistant `content`, the template strips its reasoning from the next turn's
prompt, the dataset keeps the full text, `chat_template_kwargs` reach the template, and the token export's loss
mask holds. The template is written here after the behaviour of Qwen3's: an assistant turn before the last user
turn loses its reasoning (the text up to `</think>` and the newlines after it), an assistant turn after it (the
last one) is laid out as `<think>\n` + reasoning + `\n</think>\n\n` + answer (an empty block when there is no
reasoning), and `enable_thinking: false` makes the generation prompt close an empty think block.
QWEN3_CHAT_TEMPLATE=FILE runs the same tests on another template file (say Qwen3's own, from a model folder).
The engine is a test-only fake that answers `<think>reasoning k</think>answer k` to the k-th user turn."""

import json
from pathlib import Path

import pytest
from helpers import TEMPLATE, FakeEngine, load, run_merge, stage, thinking_model

USERS = {"think": ["What is a river?", "And a lake?", "Which is bigger?"],
         "plain": ["Name a planet.", "Another one?", "And a third?"]}
SYSTEM = "You are concise."


def answer(k: int) -> str:
    return f"<think>reasoning {k}</think>answer {k}"


@pytest.fixture(scope="module")
def qwen3_model(demo_model, tmp_path_factory) -> Path:
    """The demo model's folder with the template, and <think>/</think> as single non-special added tokens as in
    Qwen3's tokenizer (no weights: the engine is fake)."""
    return thinking_model(demo_model, tmp_path_factory.mktemp("qwen3") / "model", TEMPLATE)


@pytest.fixture(scope="module")
def tokenizer(qwen3_model):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(qwen3_model)
    assert tokenizer.chat_template == TEMPLATE
    return tokenizer


def render(tokenizer, messages, generation_prompt=True, **kwargs) -> list[int]:
    """Reference encoding: transformers' own apply_chat_template over the template, then the tokenizer."""
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt, **kwargs)
    return tokenizer(text, add_special_tokens=False).input_ids


class ThinkingEngine(FakeEngine):
    """Test-only fake engine: answers the k-th user turn of a prompt with answer(k) and the end-of-turn token."""

    def __init__(self, tokenizer):
        super().__init__("fake-thinking", tokenizer, max_running_requests=2)

    def reply(self, prompt: str) -> tuple[str, str]:
        return answer(prompt.count("<|im_start|>user")), "stop"


@pytest.fixture(scope="module")
def run(qwen3_model, tokenizer, tmp_path_factory):
    """Two 3-turn ShareGPT sources through prompts, split, generate (the fake engine) and merge: `think` with the
    template's defaults and a system prompt, `plain` with chat_template_kwargs {enable_thinking: false}."""
    import yaml
    from conftest import REPO
    from shardgen.config import Config

    tmp = tmp_path_factory.mktemp("thinking")
    sources = []
    for name, users in USERS.items():
        turns = [m for i, u in enumerate(users, 1) for m in ({"from": "human", "value": u},
                                                             {"from": "gpt", "value": f"original {i}"})]
        row = {"conversations": turns, **({"system": SYSTEM} if name == "think" else {})}
        (tmp / f"{name}.jsonl").write_text(json.dumps(row) + "\n")
        sources.append({"name": name, "path": str(tmp / f"{name}.jsonl"), "format": "sharegpt",
                        "multi_turn": "each_turn",
                        **({"chat_template_kwargs": {"enable_thinking": False}} if name == "plain" else {})})
    raw = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    raw.update(results_dir=str(tmp / "results"), sources=sources, shards=1)
    raw["model"].update(path=str(qwen3_model), context_length=2048)
    config = Config.from_dict(raw)
    engine = ThinkingEngine(tokenizer)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("shardgen.engines.session.create_engine", lambda *args, **kwargs: engine)
        layout = stage(config, 1)
    dataset = run_merge(layout).to_pylist()
    conversations = {}
    for row in sorted(dataset, key=lambda r: r["turn"]):
        conversations.setdefault(row["source"], []).append(row)
    assert sorted((s, len(rows)) for s, rows in conversations.items()) == [("plain", 3), ("think", 3)]
    return layout, conversations, engine


def history(name: str, upto: int) -> list[dict]:
    """[system], user 1, assistant answer(1) (reasoning included), ..., user upto: what turn `upto` is fed."""
    messages = [{"role": "system", "content": SYSTEM}] if name == "think" else []
    for k, user in enumerate(USERS[name][:upto], 1):
        messages += [{"role": "user", "content": user}] + ([{"role": "assistant", "content": answer(k)}]
                                                           if k < upto else [])
    return messages


def test_the_completion_text_is_fed_back_and_the_template_strips_its_reasoning(run, tokenizer):
    _, conversations, engine = run
    rows = conversations["think"]
    assert len(rows) == len(USERS["think"])
    for t, row in enumerate(rows, 1):
        assert row["completion"] == answer(t)  # the dataset keeps the full text, reasoning included
        assert row["messages"] == history("think", t)  # and the history holds it as the assistant content
        assert row["prompt_ids"] == render(tokenizer, history("think", t))  # the template over that history
        assert row["prompt_ids"] in engine.prompts  # and that is what the engine was sent
    # turn 2's prompt: [system, user 1, answer(1) with its reasoning, user 2], rendered by the template
    turn2 = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USERS["think"][0]},
             {"role": "assistant", "content": "<think>reasoning 1</think>answer 1"},
             {"role": "user", "content": USERS["think"][1]}]
    assert rows[1]["prompt_ids"] == render(tokenizer, turn2)
    text = tokenizer.decode(rows[1]["prompt_ids"])
    assert "reasoning 1" not in text and "<think>" not in text  # Qwen3 strips history reasoning
    assert text.endswith(f"<|im_start|>assistant\nanswer 1<|im_end|>\n<|im_start|>user\n{USERS['think'][1]}"
                         "<|im_end|>\n<|im_start|>assistant\n")  # the visible answer only; thinking is left open
    third = tokenizer.decode(rows[2]["prompt_ids"])
    assert "answer 1" in third and "answer 2" in third and "reasoning" not in third


def test_chat_template_kwargs_reach_the_template(run, tokenizer):
    _, conversations, _ = run
    off = {"enable_thinking": False}
    assert len(conversations["plain"]) == len(USERS["plain"])
    for t, row in enumerate(conversations["plain"], 1):
        assert row["messages"] == history("plain", t) and row["completion"] == answer(t)
        assert row["prompt_ids"] == render(tokenizer, row["messages"], **off)
        assert row["prompt_ids"] != render(tokenizer, row["messages"])  # the kwarg changed the rendering
        text = tokenizer.decode(row["prompt_ids"])
        assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")  # Qwen3's empty think block
        assert text.count("<think>") == 1 and "reasoning" not in text  # only the generation prompt's


@pytest.mark.parametrize("name", ["tokens.jsonl", "tokens.parquet"])
def test_token_loss_mask_under_a_qwen3_style_template(run, tokenizer, name):
    """exports.LOSS_MASK: 1 exactly on the last turn's output_ids, 0 on its prompt_ids (earlier answers
    re-rendered there: under the template without their reasoning)."""
    layout, conversations, _ = run
    tokens, messages = load(layout.export(name)), load(layout.export("messages.jsonl"))
    assert sorted(conversations) == sorted(USERS) and len(tokens) == len(messages) == len(USERS)
    for source, rows in conversations.items():
        kwargs = {"enable_thinking": False} if source == "plain" else {}
        last, cid = rows[-1], rows[-1]["conversation_id"]
        ids, mask = tokens[cid]["input_ids"], tokens[cid]["loss_mask"]
        cut = mask.index(1)
        assert mask == [0] * cut + [1] * (len(ids) - cut)
        conversation = messages[cid]["conversations"]
        assert [m["content"] for m in conversation[:-1]] == [
            m["content"].split("</think>")[-1] for m in last["messages"]]  # answers without their reasoning
        assert [(m["reasoning_content"], m["content"]) for m in conversation if m["role"] == "assistant"] == [
            (f"reasoning {k}", f"answer {k}") for k in (1, 2, 3)]  # the export keeps every reasoning, apart
        # 0: the template over the conversation up to its last user turn (source kwargs included)
        assert ids[:cut] == last["prompt_ids"] == render(tokenizer, conversation[:-1], **kwargs)
        prompt_text = tokenizer.decode(ids[:cut])
        assert "answer 1" in prompt_text and "answer 2" in prompt_text and "reasoning" not in prompt_text
        # 1: exactly the tokens generated for the last turn, its reasoning and end-of-turn token included
        assert ids[cut:] == last["output_ids"] and ids[-1] == tokenizer.convert_tokens_to_ids("<|im_end|>")
        assert tokenizer.decode(ids[cut:], skip_special_tokens=True) == answer(3)
        for k in (1, 2):  # no earlier generated ids anywhere in the row: they were re-rendered, not copied
            earlier = rows[k - 1]["output_ids"]
            assert not any(ids[i:i + len(earlier)] == earlier for i in range(len(ids)))


@pytest.mark.parametrize("kwargs, completion, reproduced", [
    ({}, "<think>\nreasoning 3\n</think>\n\nanswer 3", True),  # Qwen3's own layout
    ({}, answer(3), False),  # the template rewrites it as <think>\n...\n</think>\n\n
    ({"enable_thinking": False}, "answer 3", True),  # the prompt closed an empty think block
    ({"enable_thinking": False}, answer(3), False)])
def test_a_rerender_reproduces_the_tokens_only_in_the_templates_own_layout(tokenizer, kwargs, completion, reproduced):
    """Where tokens.jsonl (prompt_ids + output_ids) and a re-render of messages.jsonl part: the (Qwen3-style) template
    re-lays-out the LAST assistant turn (`<think>\n` + reasoning + `\n</think>\n\n` + answer, with an empty block
    when there is no reasoning), so a render reproduces the generated tokens only when the model wrote that layout.
    The loss mask is defined on output_ids, the tokens generated, and is right either way."""
    messages = history("think", 3)
    generated = render(tokenizer, messages, **kwargs) + tokenizer(completion, add_special_tokens=False).input_ids \
        + [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    whole = render(tokenizer, messages + [{"role": "assistant", "content": completion}], False, **kwargs)
    assert (whole[:len(generated)] == generated) is reproduced
    if reproduced:
        assert tokenizer.decode(whole[len(generated):]) == "\n"
