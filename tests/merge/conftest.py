import json
import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def qwen3_model(demo_model, tmp_path_factory) -> Path:
    """The demo model's folder with the Qwen3-style template of tests/pipeline/test_thinking_template.py (or
    QWEN3_CHAT_TEMPLATE's file) and <think>/</think> as single non-special added tokens, as in Qwen3's tokenizer
    (no weights: the engines of these tests are scripted). Qwen3's own template renders an assistant message's
    `reasoning_content` where it has one and splits its content at `</think>` only where not; the written one
    has only the split, so that branch is added here (Qwen3's own file already has it)."""
    from transformers import AddedToken, AutoTokenizer

    from pipeline.test_thinking_template import QWEN3_STYLE, TEMPLATE

    split = "{%- if '</think>' in content %}"
    if TEMPLATE == QWEN3_STYLE:
        assert split in TEMPLATE
        TEMPLATE = TEMPLATE.replace(split, "{%- if m['reasoning_content'] is string %}"
                                           "{%- set reasoning = m['reasoning_content'] %}{%- elif '</think>' in content %}")

    out = tmp_path_factory.mktemp("qwen3") / "model"
    tokenizer = AutoTokenizer.from_pretrained(demo_model)
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in ("<think>", "</think>")])
    tokenizer.chat_template = TEMPLATE
    tokenizer.save_pretrained(out)
    config = json.loads((demo_model / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**config, "vocab_size": len(tokenizer)}))
    shutil.copy(demo_model / "generation_config.json", out / "generation_config.json")
    return out
