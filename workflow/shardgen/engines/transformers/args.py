"""What the CPU engine takes: the engine.args it understands, and a request's sampling as HF generate's arguments."""

from shardgen.config import ConfigError
from shardgen.sampling import FIELDS

KNOWN_ARGS = {"dtype": "float32"}  # engine.args this backend understands, with their defaults


def check_args(args: dict) -> dict:
    if unknown := sorted(set(args) - set(KNOWN_ARGS)):
        raise ConfigError(f"engine.args: {unknown} not understood by the transformers backend "
                          f"(it takes {sorted(KNOWN_ARGS)}); SGLang arguments belong in config.yaml, not the demo")
    return {**KNOWN_ARGS, **args}


def hf_sampling(sampling: dict) -> dict:
    """A request's sampling as HF generate's arguments (each field under its generation-config name). Every one is
    given, so the model's own generation config never fills a value in behind the request's back; greedy
    (temperature 0) leaves out the fields it goes without (SamplingField.greedy_ignores)."""
    sample = sampling["temperature"] > 0
    args = {}
    # what it applies (the backend registry's applies_sampling)
    for field in (f for f in FIELDS if f.generation_config):
        value = sampling[field.name]
        if sample and value == field.neutral and field.generation_config_off is not None:
            value = field.generation_config_off  # the engines' off (top_k -1) in HF's terms (0)
        args[field.generation_config] = value if sample or not field.greedy_ignores else None
    return {**args, "do_sample": sample, "max_new_tokens": sampling["max_new_tokens"]}
