"""The one validation of a configuration: workflow/schemas/config.schema.yaml (Snakemake's config schema), its
defaults filled in, every error naming the key by its dotted path and, for an unknown key, the closest valid one."""

import difflib
import json
import logging
from functools import cache

import jsonschema
import yaml

from shardgen import WORKFLOW_DIR, ConfigError
from shardgen.capture import MAX_TOP_K
from shardgen.engines.registry import BACKENDS, DEFAULT_BACKEND, settings_modules
from shardgen.sampling import FIELDS

SCHEMA_PATH = WORKFLOW_DIR / "schemas" / "config.schema.yaml"
log = logging.getLogger(__name__)
_OLD_SPELLINGS_SAID: set[str] = set()  # a config is validated several times in a process: each note once


@cache
def schema() -> dict:
    """The schema file with what is declared elsewhere filled in: one key per sampling field (shardgen.sampling.FIELDS)
    in `defaults` and in a source's `sampling`, each after `max_new_tokens`; engine.backend's choices and default and
    each backend's own section `engine.<name>` (its settings module's SCHEMA), from the backend registry;
    capture.top_k's maximum (shardgen.capture.MAX_TOP_K). Built here, not written in the file: only Config.from_dict
    validates a config (the workflow's included, common.smk), so each declaration is the one place its keys' types,
    bounds and meanings are written."""
    loaded = yaml.safe_load(SCHEMA_PATH.read_text())
    defaults = loaded["properties"]["defaults"]
    per_source = loaded["properties"]["sources"]["items"]["properties"]["sampling"]
    defaults["properties"] = _after_max_new_tokens(defaults["properties"], {f.name: f.default_schema() for f in FIELDS})
    per_source["properties"] = _after_max_new_tokens(per_source["properties"],
                                                     {f.name: f.source_schema() for f in FIELDS})
    per_source["description"] = per_source["description"].replace(
        "{sampling_fields}", ", ".join(f"`{f.name}`" for f in FIELDS))
    engine = loaded["properties"]["engine"]["properties"]
    engine["backend"].update(enum=list(BACKENDS), default=DEFAULT_BACKEND,
                             description=" or ".join(f"`{name}`" for name in BACKENDS))
    engine.update({name: module.SCHEMA for name, module in settings_modules().items()})
    top_k = loaded["properties"]["capture"]["properties"]["top_k"]
    top_k.update(maximum=MAX_TOP_K, description=top_k["description"].replace("{max_top_k}", str(MAX_TOP_K)))
    return loaded


def _after_max_new_tokens(properties: dict, fields: dict) -> dict:
    """The keys in README's order (config.doc renders them in the schema's)."""
    return {"max_new_tokens": properties.pop("max_new_tokens"), **fields, **properties}


def upgrade_old_spellings(raw: dict) -> None:
    """Each backend moves its old spellings in raw's engine section onto today's keys; a warning names each."""
    if not isinstance(raw.get("engine"), dict):
        return
    for module in settings_modules().values():
        for note in module.upgrade(raw["engine"]):
            if note not in _OLD_SPELLINGS_SAID:
                _OLD_SPELLINGS_SAID.add(note)
                log.warning("config: %s; the old spelling is still read", note)


def _with_defaults(validator_class):
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for key, sub in properties.items():
                if "default" in sub and key not in instance:
                    instance[key] = json.loads(json.dumps(sub["default"]))
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


DefaultFillingValidator = _with_defaults(jsonschema.Draft202012Validator)


def key_path(path) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "<top level>"


def _unknown_keys(error: jsonschema.ValidationError) -> str:
    allowed = list(error.schema.get("properties", {}))
    prefix = key_path(error.absolute_path) + "." if error.absolute_path else ""
    hints = []
    for unknown in sorted(set(error.instance) - set(allowed)):
        match = difflib.get_close_matches(unknown, allowed, 1)
        hints.append(f"'{prefix}{unknown}'" + (f" (did you mean '{prefix}{match[0]}'?)" if match else ""))
    return f"unknown key {', '.join(hints)} in {key_path(error.absolute_path)}; allowed: {', '.join(allowed)}"


def _describe(error: jsonschema.ValidationError) -> str:
    if error.validator == "additionalProperties":
        return _unknown_keys(error)
    where = key_path(error.absolute_path)
    if error.validator == "oneOf" and isinstance(error.instance, dict):
        return f"{where}: give exactly one of 'path' (a file) or 'dataset' (an HF dataset)"
    return f"{where}: {error.message}"


def _missing_section_key(error: jsonschema.ValidationError) -> bool:
    """A required key of the top level or of a section (model.path), which the config files laid under an overlay
    give; a source's own keys are not: a list of sources replaces the one below it whole."""
    return error.validator == "required" and not any(isinstance(part, int) for part in error.absolute_path)


def validate(raw: dict, overlay: bool = False) -> dict:
    """Fill defaults in place and raise ConfigError naming the first bad keys. overlay: a file laid over others
    (as --configfile is over config/config.yaml) may leave out required keys; every key it gives is checked."""
    if not isinstance(raw, dict):
        raise ConfigError(f"invalid config: expected a mapping of keys at the top level, got {type(raw).__name__}")
    upgrade_old_spellings(raw)
    errors = [e for e in DefaultFillingValidator(schema()).iter_errors(raw)
              if not (overlay and _missing_section_key(e))]
    errors.sort(key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        raise ConfigError("invalid config: " + "; ".join(_describe(e) for e in errors[:5]))
    names = [s["name"] for s in raw.get("sources", [])]
    if dupes := sorted({n for n in names if names.count(n) > 1}):
        raise ConfigError(f"invalid config: sources: duplicate name(s) {dupes}")
    return raw
