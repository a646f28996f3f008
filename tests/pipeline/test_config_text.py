"""Text a user writes in the config reaches the engine as written, through the real `snakemake` CLI on the demo: a
Llama-style chat template (`{{ bos_token }}`) and a system prompt with a `{word}` in it, which Snakemake would
read as wildcards if the config's text went into a rule's params."""

import json

import pyarrow.parquet as pq
import pytest
import yaml

from conftest import copy_workflow
from helpers import snakemake

pytestmark = pytest.mark.slow
LLAMA_STYLE = ("{{ bos_token }}{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
               "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
SYSTEM = "Answer as {name} would."


def test_a_braced_template_and_system_prompt_reach_generation_as_written(tmp_path, demo_model):
    work = copy_workflow(tmp_path, demo_model)
    rows = [{"query": f"What is {{x}} when x = {i}?", "response": "-"} for i in range(3)]
    (work / "braces.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    overlay = {"shards": 1, "model": {"chat_template": LLAMA_STYLE}, "defaults": {"max_new_tokens": 4},
               "sources": [{"name": "braces", "path": "braces.jsonl", "format": "query_response",
                            "system_prompt": SYSTEM}]}
    (work / "config" / "test.yaml").write_text(yaml.safe_dump(overlay))
    run = snakemake(work)
    assert run.returncode == 0, run.stdout[-4000:]

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(work / "results" / "demo-model")
    dataset = pq.read_table(work / "results" / "dataset" / "data.parquet").to_pylist()
    assert len(dataset) == 3
    for row in dataset:
        assert row["messages"][0] == {"role": "system", "content": SYSTEM}
        # what generation was sent: the template's own text, the bos token first, the braces kept
        assert tokenizer.decode(row["prompt_ids"]) == (
            f"<s><|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{row['messages'][1]['content']}"
            "<|im_end|>\n<|im_start|>assistant\n")
        assert "{x}" in row["messages"][1]["content"]
