import json
import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def qwen3_model(demo_model, tmp_path_factory) -> Path:
    """The demo model's folder with the Qwen3-style template of tests/pipeline/test_thinking_template.py (or
    QWEN3_CHAT_TEMPLATE's file) and <think>/</think> as single non-special added tokens, as in Qwen3's tokenizer
    (no weights: the engines of these tests are scripted)."""
    from transformers import AddedToken, AutoTokenizer

    from pipeline.test_thinking_template import TEMPLATE

    out = tmp_path_factory.mktemp("qwen3") / "model"
    tokenizer = AutoTokenizer.from_pretrained(demo_model)
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in ("<think>", "</think>")])
    tokenizer.chat_template = TEMPLATE
    tokenizer.save_pretrained(out)
    config = json.loads((demo_model / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**config, "vocab_size": len(tokenizer)}))
    shutil.copy(demo_model / "generation_config.json", out / "generation_config.json")
    return out
