"""model.chat_template may name a template file (Hugging Face repos ship `chat_template.jinja`): it is read as the
file, relative to the folder the workflow or command runs in, as model.path is; a file that is not there is one
line naming it (issue 38, item 6: `ValueError: substring not found` from deep in the tokenizer's set-up)."""

import pytest

from shardgen.model.demo import CHAT_TEMPLATE
from shardgen.layout import Layout
from shardgen.prompts.stage import build_prompts
from shardgen.model.target import ModelError, check_model_folder, template_file

LLAMA_STYLE = ("{{ bos_token }}{% for m in messages %}<|start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
               "{% endfor %}{% if add_generation_prompt %}<|start|>assistant\n{% endif %}")


def _sources(write_jsonl):
    return [{"name": "a", "path": write_jsonl("a.jsonl", [{"query": f"Say {i}."} for i in range(3)]),
             "format": "query_response"}]


def test_a_template_path_is_read_as_the_file(make_config, write_jsonl, tmp_path, monkeypatch):
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "llama3.jinja").write_text(LLAMA_STYLE)
    monkeypatch.chdir(tmp_path)  # relative to where the workflow runs, as model.path and the sources' paths
    from_file = make_config(_sources(write_jsonl), model={"chat_template": "templates/llama3.jinja"})
    assert template_file(from_file.model.chat_template) is not None
    assert from_file.target_model.template == LLAMA_STYLE
    assert from_file.target_model.stop_token_ids  # where the path as text failed: "substring not found"
    build_prompts(from_file, Layout(from_file.results).prompts_dir)

    as_text = make_config(_sources(write_jsonl), model={"chat_template": LLAMA_STYLE})
    assert from_file.target_model.fingerprint == as_text.target_model.fingerprint  # the same template, same keys
    assert as_text.target_model.encode([{"role": "user", "content": "Say 0."}], {}) == \
        from_file.target_model.encode([{"role": "user", "content": "Say 0."}], {})


def test_template_text_is_never_taken_for_a_path():
    assert template_file(CHAT_TEMPLATE) is None and template_file(LLAMA_STYLE) is None and template_file(None) is None


def test_a_template_file_that_is_not_there_is_one_line_naming_it(make_config, write_jsonl, tmp_path):
    config = make_config(_sources(write_jsonl), model={"chat_template": "path/to/llama3.jinja"})
    with pytest.raises(ModelError) as err:  # at every parse of the workflow, as a missing model folder
        check_model_folder(config.model, Layout(config.results).demo_model_dir)
    message = str(err.value)
    assert message.startswith("model.chat_template path/to/llama3.jinja: no such file") and "\n" not in message
    assert "template's text" in message
    with pytest.raises(ModelError, match="model.chat_template path/to/llama3.jinja: no such file"):
        config.target_model.template  # the commands' route (prompts, retry, audit)
