"""The sampling fields, declared once (FIELDS), and where each value of a request's sampling comes from.

A drafter learns the distribution it is fed, and the target as served samples with its generation config (SGLang's
and vLLM's servers read `generation_config.json` for exactly these fields). So a field the config does not set is
the model's own: a source's `sampling` wins, then the config's `defaults`, then the model's generation config,
then its neutral value (the engines' own no-op, what a model without a generation config is served with). Each
resolved value is recorded with its origin (ORIGINS) in the prompts rows, the dataset and the manifest.

Everything else is derived from FIELDS: the schema's keys (config.schema), the config sections (config.sections),
the prompts, part and dataset columns (store.tables; workflow/sql/dataset.sql selects them by name), the request's
`Sampling` (generate/turns.py), the part row, the gen_key (key_settings) and the provenance. Which fields a backend
applies is the backend registry's (the backend registry's applies_sampling).

FIELDS is read when a module that derives from it is imported, never copied here: a field added to it (as a test
does, before importing the rest) reaches every one of those."""

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ORIGINS = ("source", "config.defaults", "generation_config", "neutral")
GENERATION_CONFIG = "generation_config.json"


@dataclass(frozen=True)
class SamplingField:
    """One sampling field.

    Attributes:
        name: its key in the config's `defaults` and a source's `sampling`, its column in the prompts, part and
            dataset tables, and its key in a request's sampling (the engines' own name).
        kind: its JSON-schema type: "number" (a float, a float64 column) or "integer" (an int32 column).
        neutral: the value that leaves the model's distribution as it is (the engines' default).
        bounds: the JSON-schema bounds of a value (minimum, exclusiveMinimum, maximum).
        about: what README's key table says of `defaults.<name>`.
        generation_config: its key in a model's generation_config.json (Hugging Face's name), None where a
            generation config cannot set it.
        generation_config_off: the value a generation config turns the field off with where that is not `neutral`
            (top_k: Hugging Face's 0 is the engines' -1).
        key_at_neutral: enters the gen_key at every value. Only the fields the gen_key covered from the start do: a
            field added later enters it only away from neutral, so a row made before the field existed (sampled as
            if at neutral) stays current.
        greedy_ignores: reshapes the distribution a token is sampled from, so a greedy request (temperature 0)
            goes without it; a penalty (repetition_penalty) applies to greedy decoding too.
    """
    name: str
    kind: str
    neutral: float | int
    bounds: dict
    about: str
    generation_config: str | None
    generation_config_off: float | int | None = None
    key_at_neutral: bool = False
    greedy_ignores: bool = False

    @property
    def python_type(self) -> type:
        return int if self.kind == "integer" else float

    def default_schema(self) -> dict:
        """Its key in the schema's `defaults`: None (not written) leaves it to the model."""
        return {"type": [self.kind, "null"], **self.bounds, "default": None, "description": self.about}

    def source_schema(self) -> dict:
        """Its key in a source's `sampling`: a value, or a non-empty list of one value per prompt."""
        return {"type": [self.kind, "array"], **self.bounds, "minItems": 1, "items": {"type": self.kind, **self.bounds}}

    def engine_value(self, value):
        """A generation config's value in the engines' terms."""
        return self.neutral if value == self.generation_config_off else self.python_type(value)


FIELDS = (
    SamplingField("temperature", "number", 1.0, {"minimum": 0}, "sampling default, overridable per source; `null` = "
                  "the model's `generation_config.json`, else 1.0 (see Sampling as served)", "temperature",
                  key_at_neutral=True, greedy_ignores=True),
    SamplingField("top_p", "number", 1.0, {"exclusiveMinimum": 0, "maximum": 1},
                  "as `temperature`; without a generation config 1.0", "top_p", key_at_neutral=True,
                  greedy_ignores=True),
    SamplingField("top_k", "integer", -1, {"minimum": -1}, "as `temperature`; without a generation config -1 (off; "
                  "the generation config's 0 is off too)", "top_k", generation_config_off=0, key_at_neutral=True,
                  greedy_ignores=True),
    SamplingField("min_p", "number", 0.0, {"minimum": 0, "maximum": 1},
                  "as `temperature`; without a generation config 0.0", "min_p", greedy_ignores=True),
    SamplingField("repetition_penalty", "number", 1.0, {"exclusiveMinimum": 0},
                  "as `temperature`; without a generation config 1.0", "repetition_penalty"),
)


def names() -> tuple[str, ...]:
    return tuple(f.name for f in FIELDS)


def sampling_dataclass(name: str, before: list, value_type, after: Sequence = (), *, bases=(),
                       default=dataclasses.MISSING):
    """A frozen dataclass: the fields `before` ((name, type[, default]) each), one per sampling field of type
    value_type(field) (with `default`), then `after`."""
    own = [(f.name, value_type(f)) if default is dataclasses.MISSING else (f.name, value_type(f), default)
           for f in FIELDS]
    return dataclasses.make_dataclass(name, [*before, *own, *after], bases=bases, frozen=True)


def served(model_dir: Path) -> dict[str, tuple]:
    """Field -> (value, origin) as the model is served: its generation config's value where that sets the field
    (`do_sample` is not read, as the servers do not), else the field's neutral value."""
    path = Path(model_dir) / GENERATION_CONFIG
    own = json.loads(path.read_text()) if path.is_file() else {}
    return {f.name: (f.engine_value(own[f.generation_config]), "generation_config")
            if f.generation_config and own.get(f.generation_config) is not None else (f.neutral, "neutral")
            for f in FIELDS}


def resolve(model: dict[str, tuple], defaults: dict, source: dict) -> tuple[dict, dict]:
    """(values, origins) of the sampling fields: a source's value (a number or a per-prompt list), else the config
    defaults', else the model's (`served`). None in `defaults` or `source` means not written."""
    values, origins = {}, {}
    for name in names():
        if source.get(name) is not None:
            values[name], origins[name] = source[name], "source"
        elif defaults.get(name) is not None:
            values[name], origins[name] = defaults[name], "config.defaults"
        else:
            values[name], origins[name] = model[name]
    return values, origins


def key_settings(values: dict) -> dict:
    """The sampling values that enter the gen_key: all but a field at its neutral value that is not
    `key_at_neutral`."""
    left_out = {f.name for f in FIELDS if not f.key_at_neutral and values.get(f.name) == f.neutral}
    return {k: v for k, v in values.items() if k not in left_out}


def origin_text(origins: dict) -> str:
    """The per-row `sampling_origin` column: field -> origin, as JSON."""
    return json.dumps(origins, sort_keys=True)
