"""The batch renderer and the direct tokenizer call give what apply_chat_template + the tokenizer call give."""

import pytest

from shardgen.chat import ChatEncoder
from shardgen.model import ModelInfo

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
    encoder = ChatEncoder(tokenizer, model.template)
    assert encoder.render(CONVERSATIONS, kwargs) == reference
    assert encoder.encode(CONVERSATIONS, kwargs) == tokenizer(reference, add_special_tokens=False).input_ids
    assert (encoder.batch_template is None) == (template == LEADING_NEWLINE)
