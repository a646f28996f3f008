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


def conversation_prompt_id(messages: list[dict], later_turns: list[str]) -> str:
    """prompt_id of a conversation regenerated turn by turn: turn 1's messages then each later user turn (after a
    marker), so a one-turn conversation has the prompt_id of the same single-turn prompt."""
    return prompt_id(messages + [m for user in later_turns
                                 for m in ({"role": "next_turn", "content": ""}, {"role": "user", "content": user})])


def turn_key(previous_key: str, previous_output_ids: list[int]) -> str:
    """gen_key of turn t >= 2: the previous turn's gen_key (which covers the conversation, model, template and
    sampling) and the exact token ids that turn generated (its answer is in turn t's history)."""
    digest = hashlib.sha256(previous_key.encode("ascii") + b":")
    digest.update(_json(list(previous_output_ids)).encode("ascii"))
    return digest.hexdigest()


def gen_key(prompt_id: str, model_fingerprint: dict, sampling: dict) -> str:
    """Changes with the prompt, the model/tokenizer/template hashes or any sampling parameter."""
    return _sha256_json({"prompt_id": prompt_id, "model": model_fingerprint, "sampling": sampling})


def gen_key_of(model_fingerprint: dict, sampling: dict) -> Callable[[str], str]:
    """gen_key as a function of the prompt_id alone, for the many prompts of one source: the JSON around the
    (hex, so never escaped) prompt_id is rendered once."""
    placeholder = "0" * 64
    key = _json({"prompt_id": placeholder, "model": model_fingerprint, "sampling": sampling})
    head, tail = (part.encode("utf-8") for part in key.split(placeholder))
    return lambda pid: hashlib.sha256(head + pid.encode("ascii") + tail).hexdigest()


def pick(values, prompt_id: str, field: str):
    """One value per prompt of a sampling field given as a list (a number is its own value): sha256 of the field
    name and the prompt_id, mod the list's length, so the same prompt always gets the same value whatever the
    worker count or row order, and two listed fields vary independently."""
    if not isinstance(values, list):
        return values
    digest = hashlib.sha256(f"{field}:{prompt_id}".encode("utf-8")).digest()
    return values[int.from_bytes(digest[:8], "big") % len(values)]
