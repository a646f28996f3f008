"""The configuration's sections as frozen dataclasses, built once from the schema-validated dict. The schema
(workflow/schemas/config.schema.yaml) holds every default and type; these mirror its keys (tests/test_config.py
fails when they differ), so a field here never carries a default of its own."""

import json
import typing
from dataclasses import Field, asdict, dataclass, fields, is_dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from shardgen.keys import pick
from shardgen.sampling import key_settings, resolve, sampling_dataclass


class Section:
    if TYPE_CHECKING:  # every section is a dataclass
        __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    def as_dict(self) -> dict:
        return asdict(self)


def build(cls, raw: dict):
    """cls from a validated (default-filled) mapping, nested sections and lists of sections included."""
    if hasattr(cls, "from_section"):  # a section whose keys are not its fields one to one
        raw = cls.from_section(raw)
    hints = typing.get_type_hints(cls)
    values = {}
    for f in fields(cls):
        if f.name not in raw:
            continue  # only the optional keys the schema gives no default (a source's path or dataset)
        kind, value = hints[f.name], raw[f.name]
        if is_dataclass(kind):
            value = build(kind, value)
        elif typing.get_origin(kind) is tuple and is_dataclass(item := typing.get_args(kind)[0]):
            value = tuple(build(item, v) for v in value)
        values[f.name] = value
    return cls(**values)


@dataclass(frozen=True)
class ModelConfig(Section):
    path: str
    chat_template: str | None
    context_length: int
    trust_remote_code: bool
    reasoning_tags: list[str] | None  # [open, close]; None: the model does not think in tags


@dataclass(frozen=True)
class ExportsConfig(Section):
    on_length: str  # end_conversation | drop_conversation


@dataclass(frozen=True)
class HiddenStatesConfig(Section):
    enabled: bool  # every captured turn's hidden states at `layers` (shardgen/capture.py: HiddenCapture)
    layers: str | list[int | str]  # eagle3 | dflash | output_hidden_states indices and last_before_norm
    dtype: str  # bfloat16 | float8_e4m3fn
    allow_short_disk: bool  # start a shard whose forecast states exceed the free space (generate/hidden_preflight.py)


@dataclass(frozen=True)
class CaptureConfig(Section):
    logprobs: bool  # the chosen token's logprob and the top_k per generated token (shardgen/capture.py)
    top_k: int
    signal: bool  # every turn's logprob_mean and logprob_min, from the chosen token's logprob alone
    hidden_states: HiddenStatesConfig


@dataclass(frozen=True)
class EngineConfig(Section):
    """The engine section in no backend's terms, plus the chosen backend's own settings (`engine.<backend>`, its
    schema in its settings module: shardgen.engines.registry.BACKENDS)."""
    backend: str
    memory_share: float
    max_running_requests: int | None
    tp_size: int
    dp_size: int
    inflight: float
    cache_dir: str
    stall_seconds: float
    args: dict
    backend_settings: dict  # engine.<backend>; the other backends' sections are not this run's

    @classmethod
    def from_section(cls, raw: dict) -> dict:
        """The fields of a validated engine section: the chosen backend's own section as backend_settings."""
        return {**raw, "backend_settings": raw.get(raw["backend"], {})}

    def as_dict(self) -> dict:
        """The section as the configuration spells it (what Config.with_engine takes back, validating it)."""
        section = asdict(self)
        if own := section.pop("backend_settings"):  # a backend without settings of its own has no section
            section[self.backend] = own
        return section

    @property
    def gpus_per_engine(self) -> int:
        """GPUs one engine spans, and so one generate job leases and asks the scheduler for: its tensor-parallel
        times its data-parallel ranks."""
        return self.tp_size * self.dp_size

    def window(self, max_running_requests: int) -> int:
        """Requests kept in flight: inflight x what the engine runs at once."""
        return max(1, int(self.inflight * max_running_requests))


@dataclass(frozen=True)
class HardwareConfig(Section):
    gpu: str | None
    peaks: dict  # GPU name -> {tflops, tbps}: a table the user extends, not keys of ours


@dataclass(frozen=True)
class CheckpointConfig(Section):
    every_records: int
    every_seconds: float


@dataclass(frozen=True)
class PromptsConfig(Section):
    workers: int | None


# `defaults`: max_new_tokens, one key per sampling field (shardgen.sampling.FIELDS), chat_template_kwargs. A field's
# None: not written, the model's generation config gives it (shardgen.sampling.resolve).
if TYPE_CHECKING:
    @dataclass(frozen=True)
    class SamplingDefaults(Section):
        """What the checker knows of the class made from FIELDS below: a sampling field's value by its name."""
        max_new_tokens: int
        chat_template_kwargs: dict

        def __getattr__(self, name: str) -> Any: ...

    @dataclass(frozen=True)
    class SamplingOverrides(Section):
        """As SamplingDefaults."""
        max_new_tokens: int | None = None

        def __getattr__(self, name: str) -> Any: ...
else:
    SamplingDefaults = sampling_dataclass("SamplingDefaults", [("max_new_tokens", int)],
                                          lambda f: f.python_type | None, [("chat_template_kwargs", dict)],
                                          bases=(Section,))
    # A source's `sampling`; None: not set, the default applies. A field's list: one value per prompt, chosen from
    # its prompt_id (keys.pick); the list enters the gen_key.
    SamplingOverrides = sampling_dataclass("SamplingOverrides", [("max_new_tokens", int | None, None)],
                                           lambda f: f.python_type | list | None, bases=(Section,), default=None)


@dataclass(frozen=True)
class SourceConfig(Section):
    name: str
    format: str
    config: str | None
    split: str
    revision: str | None
    data_files: str | list | dict | None
    fields: dict
    limit: int | None
    system_prompt: str | None
    multi_turn: str
    sampling: SamplingOverrides
    chat_template_kwargs: dict
    capture: bool | None  # this source captured or not, whatever capture.logprobs says; None: as it says
    hidden_states: bool | None  # its hidden states captured or not, whatever capture.hidden_states says
    path: str | None = None  # exactly one of path and dataset is set (the schema's oneOf)
    dataset: str | None = None

    def sampling_over(self, defaults: SamplingDefaults, served: dict) -> dict:
        """This source's sampling params: its own, else the config defaults', else the model's as served
        (`served`: shardgen.sampling.served). A sampled field may be a list (sampling_of gives one prompt's value)."""
        values, _ = resolve(served, defaults.as_dict(), self.sampling.as_dict())
        return {"max_new_tokens": self.sampling.max_new_tokens or defaults.max_new_tokens, **values}

    def sampling_origins(self, defaults: SamplingDefaults, served: dict) -> dict:
        """Where each sampled field's value comes from (shardgen.sampling.ORIGINS)."""
        return resolve(served, defaults.as_dict(), self.sampling.as_dict())[1]

    @staticmethod
    def sampling_of(sampling: dict, prompt_id: str) -> dict:
        """One prompt's sampling params: each listed field's value chosen from its prompt_id (keys.pick)."""
        return {k: pick(v, prompt_id, k) for k, v in sampling.items()}

    def template_kwargs(self, defaults: SamplingDefaults) -> dict:
        return {**defaults.chat_template_kwargs, **self.chat_template_kwargs}

    def sampling_extra(self, defaults: SamplingDefaults) -> str:
        kwargs = self.template_kwargs(defaults)
        return json.dumps({"chat_template_kwargs": kwargs} if kwargs else {}, sort_keys=True)

    def gen_settings(self, defaults: SamplingDefaults, served: dict) -> dict:
        """What enters the gen_key of this source's prompts besides the prompt and the model hashes."""
        return {**key_settings(self.sampling_over(defaults, served)), "extra": self.sampling_extra(defaults)}
