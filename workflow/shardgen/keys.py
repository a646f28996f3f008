"""Stable identities: prompt_id (what is asked) and gen_key (what is asked, of which model, how)."""

import hashlib
import json
import unicodedata


def canonical_messages(messages: list[dict]) -> list[dict]:
    return [{"role": m["role"], "content": unicodedata.normalize("NFC", m["content"]).strip()} for m in messages]


def _sha256_json(value) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def prompt_id(messages: list[dict]) -> str:
    """sha256 of the canonical JSON of the messages (system turn included, NFC, stripped)."""
    return _sha256_json(canonical_messages(messages))


def gen_key(prompt_id: str, model_fingerprint: dict, sampling: dict) -> str:
    """Changes with the prompt, the model/tokenizer/template hashes or any sampling parameter."""
    return _sha256_json({"prompt_id": prompt_id, "model": model_fingerprint, "sampling": sampling})
