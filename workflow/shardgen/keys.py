"""Stable identities: prompt_id (what is asked) and gen_key (what is asked, of which model, how)."""

import hashlib
import json
import unicodedata
from collections.abc import Callable


def canonical_messages(messages: list[dict]) -> list[dict]:
    return [{"role": m["role"], "content": unicodedata.normalize("NFC", m["content"]).strip()} for m in messages]


def _json(value) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _sha256_json(value) -> str:
    return hashlib.sha256(_json(value).encode("utf-8")).hexdigest()


def prompt_id(messages: list[dict]) -> str:
    """sha256 of the canonical JSON of the messages (system turn included, NFC, stripped)."""
    return _sha256_json(canonical_messages(messages))


def gen_key(prompt_id: str, model_fingerprint: dict, sampling: dict) -> str:
    """Changes with the prompt, the model/tokenizer/template hashes or any sampling parameter."""
    return _sha256_json({"prompt_id": prompt_id, "model": model_fingerprint, "sampling": sampling})


def gen_key_function(model_fingerprint: dict, sampling: dict) -> Callable[[str], str]:
    """gen_key for one model and sampling, as a function of prompt_id: the JSON around the id is serialized once
    (a hex prompt_id needs no escaping, so the text is the same as gen_key's)."""
    marker = "0" * 64
    head, tail = _json({"prompt_id": marker, "model": model_fingerprint, "sampling": sampling}).split(marker)
    head, tail = head.encode(), tail.encode()
    return lambda pid: hashlib.sha256(head + pid.encode() + tail).hexdigest()
