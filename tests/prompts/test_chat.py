"""The batch renderer and the direct tokenizer call give what apply_chat_template + the tokenizer call give."""

import pytest

from shardgen.model.chat import ChatEncoder
from shardgen.model.target import ModelInfo

CONVERSATIONS = [
    [{"role": "user", "content": "What is 2 + 2?"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "  Spaces and\nnewlines  "}],
    [{"role": "user", "content": "<|im_end|> a special token, {{ jinja }} and caf\u00e9"}],
    [{"role": "user", "content": "first"}, {"role": "user", "content": "second"}],
]
# A Qwen-like template (namespace, loop, default system turn, enable_thinking) and one that starts with a newline,
# which the loop wrapper's trim_blocks would eat: that one must fall back to rendering row by row.
QWEN_LIKE = ("{%- set ns = namespace(system=false) -%}{%- for m in messages -%}{%- if m.role == 'system' -%}"
             "{%- set ns.system = true -%}{%- endif -%}{%- endfor -%}"
             "{%- if not ns.system -%}<|im_start|>system\nYou are helpful.<|im_end|>\n{% endif -%}"
             "{%- for m in messages -%}<|im_start|>{{ m.role }}\n{{ m.content | trim }}<|im_end|>"
             "{{ '\n' if not loop.last }}{%- endfor -%}\n"
             "{%- if add_generation_prompt -%}<|im_start|>assistant\n"
             "{%- if enable_thinking is defined and not enable_thinking -%}<think>\n\n</think>\n\n{%- endif -%}"
             "{%- endif -%}")
LEADING_NEWLINE = "\n{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{{ bos_token }}"


@pytest.mark.parametrize("template", [None, QWEN_LIKE, LEADING_NEWLINE])
@pytest.mark.parametrize("kwargs", [{}, {"enable_thinking": False}])
def test_same_text_and_ids_as_transformers(demo_model, template, kwargs):
    model = ModelInfo(demo_model, chat_template=template)
    tokenizer = model.tokenizer
    reference = tokenizer.apply_chat_template(CONVERSATIONS, add_generation_prompt=True, tokenize=False, **kwargs)
    encoder = ChatEncoder.of(tokenizer, model.template)
    assert encoder.render(CONVERSATIONS, kwargs) == reference
    assert encoder.encode(CONVERSATIONS, kwargs) == tokenizer(reference, add_special_tokens=False).input_ids
    assert (encoder.batch_template is None) == (template == LEADING_NEWLINE)


@pytest.mark.parametrize("template", [None, QWEN_LIKE])
def test_an_encoder_rebuilt_from_its_portable_form_gives_the_same_text_and_ids(demo_model, template):
    model = ModelInfo(demo_model, chat_template=template)
    rebuilt = ChatEncoder.from_portable(model.chat.portable())
    for kwargs in ({}, {"enable_thinking": False}):
        assert rebuilt.render(CONVERSATIONS, kwargs) == model.chat.render(CONVERSATIONS, kwargs)
        assert rebuilt.encode(CONVERSATIONS, kwargs) == model.chat.encode(CONVERSATIONS, kwargs)


def test_a_portable_encoder_is_built_without_the_transformers_tokenizer_or_torch(demo_model, tmp_path):
    """A prompts worker builds one: importing transformers' tokenizer (and torch) cost ~18.5 s of CPU per worker
    on a 16-core GPU host, against ~2.5 s of rows per worker at 16 workers and 200K rows."""
    import pickle
    import subprocess
    import sys

    spec = tmp_path / "chat.pickle"
    spec.write_bytes(pickle.dumps(ModelInfo(demo_model).chat.portable()))
    loaded = subprocess.run([sys.executable, "-c", (
        "import pickle, sys; from shardgen.model.chat import ChatEncoder; "
        f"ChatEncoder.from_portable(pickle.loads(open({str(spec)!r}, 'rb').read())).encode([[{{'role': 'user', "
        "'content': 'hi'}]], {}); "
        "print(sorted(m for m in ('torch', 'transformers.tokenization_utils_base') if m in sys.modules))")],
        capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
