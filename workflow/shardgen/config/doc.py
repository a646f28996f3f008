"""README's `## Configuration` key table and its list of input formats, rendered from the schema (defaults and
descriptions) and shardgen.prompts.formats (the formats): `python -m shardgen.config.doc` prints both."""

import json
import textwrap

from shardgen.config.schema import schema
from shardgen.prompts.formats import FORMATS


def _rows(node: dict, prefix: str = ""):
    for key, sub in node.get("properties", {}).items():
        name = prefix + key
        if sub.get("type") == "array":
            yield from _rows(sub["items"], name + "[].")
        elif "properties" in sub and "description" not in sub:  # a section: its keys are the rows
            yield from _rows(sub, name + ".")
        else:
            yield name, sub


def _default(sub: dict) -> str:
    return f"`{json.dumps(sub['default']) if not isinstance(sub['default'], str) else sub['default']}`" \
        if "default" in sub else "—"


def _meaning(name: str, sub: dict) -> str:
    if name == "sources[].format":
        return ", ".join(f"`{f}`" for f in FORMATS)
    return sub.get("description", "")


def key_table() -> str:
    lines = ["| key | default | meaning |", "|---|---|---|"]
    lines += [f"| `{name}` | {_default(sub)} | {_meaning(name, sub)} |" for name, sub in _rows(schema())]
    return "\n".join(lines)


def formats_text() -> str:
    """One paragraph, wrapped at the README's 120 characters."""
    text = "Formats: " + "; ".join(f"`{name}` = {fmt.about}" for name, fmt in FORMATS.items()) + (
        ". The original answer is kept as `reference`; with `multi_turn: first` later turns are counted as "
        "`dropped_turns`, with `each_turn` every one is regenerated (see Multi-turn).")
    return textwrap.fill(text, width=120, break_long_words=False, break_on_hyphens=False)


if __name__ == "__main__":
    print(key_table() + "\n\n" + formats_text())
