"""Fixtures of the model folders the scripted runs of merge_runs.py use: qwen3_model, a Qwen3-style model folder;
qwen3_real_model, Qwen3's own tokenizer, template and generation config (tests/data/qwen3)."""

import json
import lzma
import shutil
from pathlib import Path

import pytest

from merge_runs import QWEN3


@pytest.fixture(scope="module")
def qwen3_model(demo_model, tmp_path_factory) -> Path:
    """The demo model's folder with the Qwen3-style template of tests/pipeline/test_thinking_template.py (or
    QWEN3_CHAT_TEMPLATE's file) and <think>/</think> as single non-special added tokens, as in Qwen3's tokenizer
    (no weights: the engines of these tests are scripted). Qwen3's own template renders an assistant message's
    `reasoning_content` where it has one and splits its content at `</think>` only where not; the written one
    has only the split, so that branch is added here (Qwen3's own file already has it)."""
    from helpers import QWEN3_STYLE, TEMPLATE, thinking_model

    template, split = TEMPLATE, "{%- if '</think>' in content %}"
    if template == QWEN3_STYLE:
        assert split in template
        template = template.replace(split, "{%- if m['reasoning_content'] is string %}"
                                           "{%- set reasoning = m['reasoning_content'] %}"
                                           "{%- elif '</think>' in content %}")
    return thinking_model(demo_model, tmp_path_factory.mktemp("qwen3") / "model", template)


@pytest.fixture(scope="module")
def qwen3_real_model(demo_model, tmp_path_factory) -> Path:
    """A model folder with Qwen3's own tokenizer, chat template and generation config (tests/data/qwen3) and the
    demo model's config at Qwen3's vocabulary (no weights: the engines of these tests are scripted). Its name holds
    "qwen", as a Qwen3 checkpoint's does: FastChat picks its conversation template by the model path."""
    out = tmp_path_factory.mktemp("real") / "qwen3"
    out.mkdir()
    (out / "tokenizer.json").write_bytes(lzma.decompress((QWEN3 / "tokenizer.json.xz").read_bytes()))
    for name in ("tokenizer_config.json", "generation_config.json"):
        shutil.copy(QWEN3 / name, out / name)
    config = json.loads((demo_model / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**config, "vocab_size": 151669}))
    return out
