"""Render conversations with a chat template and tokenize them, a batch at a time, with the same result as
transformers' apply_chat_template + tokenizer call but without its per-row Python."""

import logging

from shardgen.faults import tokenizer_fault_point

log = logging.getLogger(__name__)

# Contents never hold a NUL (formats rejects them as invalid_text), so it can separate rendered rows.
SEPARATOR = "\x00"
PROBES = [[{"role": "user", "content": "Hi"}],
          [{"role": "system", "content": " Be brief.\n"}, {"role": "user", "content": "\n2 + 2?  "}],
          [{"role": "user", "content": "a"}, {"role": "user", "content": "{{ b }} <tool_response>"}]]


class ChatEncoder:
    """One tokenizer and template. The template is rendered once per batch (wrapped in a loop over the batch)
    when that gives the same text as rendering row by row, which is checked on probes and on each batch's first
    row; otherwise row by row with the same compiled template. Ids come from the Rust tokenizer directly."""

    def __init__(self, template: str, special_tokens: dict, backend=None, slow_tokenizer=None):
        """backend: a `tokenizers.Tokenizer`; slow_tokenizer: a Python transformers tokenizer, used when there is no
        backend."""
        from transformers.utils.chat_template_utils import _compile_jinja_template

        self.template, self.special_tokens = template, special_tokens
        self.backend, self.slow_tokenizer = backend, slow_tokenizer
        self.row_template = _compile_jinja_template(template)
        try:
            self.batch_template = _compile_jinja_template(
                "{% for messages in shardgen_batch %}" + template + SEPARATOR + "{% endfor %}")
        except Exception as err:  # jinja raises several types; any means "render row by row"
            log.info("chat template cannot be rendered by batch (%s); rendering row by row", err)
            self.batch_template = None

    @classmethod
    def of(cls, tokenizer, template: str) -> "ChatEncoder":
        """From a loaded transformers tokenizer."""
        special_tokens = dict(tokenizer.special_tokens_map)
        if not tokenizer.is_fast:
            return cls(template, special_tokens, slow_tokenizer=tokenizer)
        # a call sets the backend's truncation, padding and special-token splitting as transformers would
        tokenizer(["probe"], add_special_tokens=False)
        return cls(template, special_tokens, backend=tokenizer.backend_tokenizer)

    def portable(self) -> dict | None:
        """What another process needs to build this encoder without loading the transformers tokenizer (its
        imports cost a prompts worker 5-7 s of CPU here, ~18.5 s on a GPU host with torch); None for a slow
        tokenizer."""
        if self.backend is None:
            return None
        return {"template": self.template, "special_tokens": self.special_tokens,
                "tokenizer_json": self.backend.to_str(), "encode_special_tokens": self.backend.encode_special_tokens}

    @classmethod
    def from_portable(cls, spec: dict) -> "ChatEncoder":
        from tokenizers import Tokenizer

        backend = Tokenizer.from_str(spec["tokenizer_json"])
        backend.encode_special_tokens = spec["encode_special_tokens"]
        return cls(spec["template"], spec["special_tokens"], backend=backend)

    def _render_rows(self, conversations: list[list[dict]], kwargs: dict) -> list[str]:
        return [self.row_template.render(messages=c, tools=None, documents=None, add_generation_prompt=True,
                                         **self.special_tokens, **kwargs) for c in conversations]

    def _render_batch(self, conversations: list[list[dict]], kwargs: dict) -> list[str] | None:
        text = self.batch_template.render(shardgen_batch=conversations, tools=None, documents=None,
                                          add_generation_prompt=True, **self.special_tokens, **kwargs)
        texts = text.split(SEPARATOR)[:-1]
        same = len(texts) == len(conversations) and texts[0] == self._render_rows(conversations[:1], kwargs)[0]
        return texts if same else None

    def render(self, conversations: list[list[dict]], kwargs: dict) -> list[str]:
        if self.batch_template is not None and conversations:
            if self._render_batch(PROBES, kwargs) == self._render_rows(PROBES, kwargs):
                if (texts := self._render_batch(conversations, kwargs)) is not None:
                    return texts
            log.info("chat template renders differently by batch; rendering row by row")
            self.batch_template = None
        return self._render_rows(conversations, kwargs)

    def ids(self, texts: list[str]) -> list[list[int]]:
        tokenizer_fault_point(texts)
        if self.backend is None:
            return self.slow_tokenizer(texts, add_special_tokens=False).input_ids
        return [e.ids for e in self.backend.encode_batch_fast(texts, add_special_tokens=False)]

    def encode(self, conversations: list[list[dict]], kwargs: dict) -> list[list[int]]:
        return self.ids(self.render(conversations, kwargs))
