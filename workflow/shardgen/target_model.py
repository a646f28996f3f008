"""The model side of a prompt: tokenizer, chat template, stop ids and the hashes that enter every gen_key."""

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from shardgen import ShardgenError
from shardgen.config_sections import ModelConfig

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "merges.txt",
                   "special_tokens_map.json", "added_tokens.json")


class ModelError(ShardgenError, ValueError):
    """The model folder cannot be used (missing, no chat template, ...)."""


def check_model_folder(model: ModelConfig, built_by_workflow: Path) -> None:
    """Raise ModelError naming model.path when it is no model folder (no config.json), unless it is the folder the
    workflow builds itself (the demo model): checked at every parse, before Snakemake would say only that an input
    file is missing."""
    path = Path(model.path)
    if (path / "config.json").is_file() or path.resolve() == built_by_workflow.resolve():
        return
    state = "holds no config.json" if path.is_dir() else "is not a directory" if path.exists() else "not found"
    raise ModelError(f"model.path {model.path}: {state} (resolved to {path.resolve()}); it must be a model folder "
                     "(config.json, tokenizer, weights)")


def _hash_files(folder: Path, names) -> str:
    digest = hashlib.sha256()
    for name in names:
        if (folder / name).is_file():
            digest.update(name.encode() + b"\0" + (folder / name).read_bytes())
    return digest.hexdigest()


@dataclass
class ModelInfo:
    path: Path
    chat_template: str | None = None
    trust_remote_code: bool = False
    _cache: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_config(cls, model_cfg: ModelConfig) -> "ModelInfo":
        path = Path(model_cfg.path).resolve()
        if not (path / "config.json").is_file():
            raise ModelError(f"model.path: {model_cfg.path} is not a model folder (no config.json in {path})")
        return cls(path, model_cfg.chat_template, model_cfg.trust_remote_code)

    @cached_property
    def tokenizer(self):
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(self.path, trust_remote_code=self.trust_remote_code)
        if self.chat_template is not None:
            tokenizer.chat_template = self.chat_template
        if not tokenizer.chat_template:
            raise ModelError(f"model {self.path} has no chat template: set model.chat_template in the config")
        return tokenizer

    @cached_property
    def template(self) -> str:
        return self.tokenizer.chat_template

    @cached_property
    def fingerprint(self) -> dict:
        """model/tokenizer/template hashes: any change makes every gen_key new."""
        weights = sorted(p.name + ":" + str(p.stat().st_size) for p in self.path.glob("*.safetensors"))
        return {
            "model": hashlib.sha256((self.path / "config.json").read_bytes() + json.dumps(weights).encode()).hexdigest(),
            "tokenizer": _hash_files(self.path, TOKENIZER_FILES),
            "template": hashlib.sha256(self.template.encode()).hexdigest(),
        }

    @cached_property
    def stop_token_ids(self) -> list[int]:
        """The generation config's eos ids plus the template's end-of-turn token."""
        ids = []
        gen_config = self.path / "generation_config.json"
        eos = json.loads(gen_config.read_text()).get("eos_token_id") if gen_config.is_file() else None
        eos = self.tokenizer.eos_token_id if eos is None else eos
        ids += eos if isinstance(eos, list) else [eos] if eos is not None else []
        if (end_of_turn := self._end_of_turn_id()) is not None:
            ids.append(end_of_turn)
        return sorted(set(ids))

    def _end_of_turn_id(self) -> int | None:
        # The first special token the template puts right after an assistant turn's content.
        marker = "shardgen-end-of-turn-probe"
        text = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": marker}], tokenize=False)
        tail = self.tokenizer(text[text.rindex(marker) + len(marker):], add_special_tokens=False).input_ids
        special = set(self.tokenizer.all_special_ids) | set(self.tokenizer.added_tokens_decoder)
        return next((t for t in tail if t in special), None)

    @cached_property
    def chat(self):
        from shardgen.prompts.chat import ChatEncoder

        return ChatEncoder.of(self.tokenizer, self.template)

    def encode(self, messages: list[dict], template_kwargs: dict) -> list[int]:
        return self.encode_batch([messages], template_kwargs)[0]

    def encode_batch(self, conversations: list[list[dict]], template_kwargs: dict) -> list[list[int]]:
        """Render with the chat template and tokenize, a batch at a time."""
        return self.chat.encode(conversations, template_kwargs)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)
