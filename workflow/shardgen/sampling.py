"""The sampling fields, declared once, and where each value of a request's sampling comes from.

A drafter learns the distribution it is fed, and the target as served samples with its generation config (SGLang's
and vLLM's servers read `generation_config.json` for exactly these fields). So a field the config does not set is
the model's own: a source's `sampling` wins, then the config's `defaults`, then the model's generation config,
then NEUTRAL (the engines' own no-op value, what a model without a generation config is served with). Each
resolved value is recorded with its origin (ORIGINS) in the prompts rows, the dataset and the manifest."""

import json
from pathlib import Path

# Field -> its value that leaves the model's distribution as it is (the engines' defaults); its type is the
# column's (tables.SAMPLING).
NEUTRAL = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0}
FIELDS = tuple(NEUTRAL)
# Added after the gen_key first covered sampling: they enter it only away from their no-op value, so a row made
# before they existed (sampled as if at that value) stays current.
KEYED_WHEN_SET = ("min_p", "repetition_penalty")
ORIGINS = ("source", "config.defaults", "generation_config", "neutral")
GENERATION_CONFIG = "generation_config.json"


def _engine_value(name: str, value):
    """A generation config's value in the engines' terms: Hugging Face's top_k 0 (off) is the engines' -1."""
    if name == "top_k":
        return -1 if value in (0, None) else int(value)
    return float(value)


def served(model_dir: Path) -> dict[str, tuple]:
    """Field -> (value, origin) as the model is served: its generation config's value where that sets the field
    (`do_sample` is not read, as the servers do not), else NEUTRAL."""
    path = Path(model_dir) / GENERATION_CONFIG
    own = json.loads(path.read_text()) if path.is_file() else {}
    return {name: (_engine_value(name, own[name]), "generation_config") if own.get(name) is not None
            else (NEUTRAL[name], "neutral") for name in FIELDS}


def resolve(model: dict[str, tuple], defaults: dict, source: dict) -> tuple[dict, dict]:
    """(values, origins) of the sampling fields: a source's value (a number or a per-prompt list), else the config
    defaults', else the model's (`served`). None in `defaults` or `source` means not written."""
    values, origins = {}, {}
    for name in FIELDS:
        if source.get(name) is not None:
            values[name], origins[name] = source[name], "source"
        elif defaults.get(name) is not None:
            values[name], origins[name] = defaults[name], "config.defaults"
        else:
            values[name], origins[name] = model[name]
    return values, origins


def key_settings(values: dict) -> dict:
    """The sampling values that enter the gen_key (see KEYED_WHEN_SET)."""
    return {k: v for k, v in values.items() if k not in KEYED_WHEN_SET or v != NEUTRAL[k]}


def origin_text(origins: dict) -> str:
    """The per-row `sampling_origin` column: field -> origin, as JSON."""
    return json.dumps(origins, sort_keys=True)
