"""The model side of a prompt: tokenizer, chat template, stop ids and the hashes that enter every gen_key."""

import hashlib
import json
from contextlib import suppress
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from shardgen import ShardgenError
from shardgen.config.sections import ModelConfig
from shardgen.sampling import served
from shardgen.store.atomic import replace_text

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "merges.txt",
                   "special_tokens_map.json", "added_tokens.json")


class ModelError(ShardgenError, ValueError):
    """The model folder cannot be used (missing, no chat template, ...)."""


def check_model_folder(model: ModelConfig, built_by_workflow: Path) -> None:
    """Raise ModelError naming model.path when it is no model folder (no config.json), unless it is the folder the
    workflow builds itself (the demo model), or naming model.chat_template when it is a file that is not there:
    checked at every parse, before Snakemake would say only that an input file is missing."""
    if Path(model.path).resolve() != built_by_workflow.resolve():
        _require_model_folder(model.path)
    template_text(model.chat_template)


def template_file(value: str | None) -> Path | None:
    """The file model.chat_template names, where it names one: a value with no `{` and no line break (a Jinja
    template without a `{` would render one fixed text for every conversation, so it cannot be meant as one; Hugging
    Face repos ship theirs as chat_template.jinja). Relative to the folder the workflow or command runs in, as
    model.path and the sources' paths are."""
    return Path(value) if value and "{" not in value and "\n" not in value else None


def template_text(value: str | None) -> str | None:
    """model.chat_template as template text: the file's text where it names a file, else the value itself."""
    path = template_file(value)
    if path is None:
        return value
    if not path.is_file():
        raise ModelError(f"model.chat_template {value}: no such file (resolved to {path.resolve()}); a value without "
                         "`{` is read as the path of a template file: give an existing file or the template's text")
    return path.read_text(encoding="utf-8")


def _require_model_folder(given: str) -> None:
    path = Path(given)
    if (path / "config.json").is_file():
        return
    state = "holds no config.json" if path.is_dir() else "is not a directory" if path.exists() else "not found"
    raise ModelError(f"model.path {given}: {state} (resolved to {path.resolve()}); it must be a model folder "
                     "(config.json, tokenizer, weights)")


def _hash_files(folder: Path, names) -> str:
    digest = hashlib.sha256()
    for name in names:
        if (folder / name).is_file():
            digest.update(name.encode() + b"\0" + (folder / name).read_bytes())
    return digest.hexdigest()


# What the manifest's `model` hash covers, said where it is recorded.
MODEL_HASH_COVERS = ("sha256 over config.json, model.safetensors.index.json (if any) and, per weight file "
                     "(*.safetensors, *.bin), its name, size, safetensors JSON header (tensor names, dtypes, shapes, "
                     "offsets) and three 1 MiB blocks of its data (the start, the middle, the end); a change elsewhere "
                     "in the tensor data is not seen")
WEIGHT_FILES = ("*.safetensors", "*.bin")
INDEX_FILES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
BLOCK = 1 << 20


def _weight_file_parts(path: Path):
    """A weight file's identifying bytes: its safetensors header (none for another format), then sampled blocks of
    the data after it. Reading the header and three blocks keeps this to milliseconds on a many-GB checkpoint."""
    size = path.stat().st_size
    with path.open("rb") as f:
        start = 0
        if path.suffix == ".safetensors":
            length = int.from_bytes(f.read(8), "little")
            if size < 8 or 8 + length > size:
                raise ModelError(f"model weights {path}: not a safetensors file (header length {length}, "
                                 f"file size {size})")
            yield f.read(length)
            start = 8 + length
        for offset in sorted({start, max(start, start + (size - start - BLOCK) // 2), max(start, size - BLOCK)}):
            f.seek(offset)
            yield f.read(BLOCK)


def weights_digest(folder: Path) -> str:
    """The `model` hash: MODEL_HASH_COVERS."""
    digest = hashlib.sha256((folder / "config.json").read_bytes())
    for name in INDEX_FILES:
        if (folder / name).is_file():
            digest.update(b"\0" + name.encode() + b"\0" + (folder / name).read_bytes())
    for path in sorted({p for pattern in WEIGHT_FILES for p in folder.glob(pattern)}):
        digest.update(f"\0{path.name}\0{path.stat().st_size}\0".encode())
        for part in _weight_file_parts(path):
            digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()


def folder_signature(folder: Path, chat_template: str | None, trust_remote_code: bool) -> str:
    """What a model's fingerprint is made of, read cheaply: each file of its folder by name, size and modification
    time (ns; a link by its target's), the config's own template and trust_remote_code. The tokenizer, its template
    and the weights all come from these files."""
    digest = hashlib.sha256(json.dumps([chat_template, trust_remote_code]).encode())
    for entry in sorted(folder.iterdir()):
        if entry.is_file():
            stat = entry.stat()
            digest.update(f"\0{entry.name}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
    return digest.hexdigest()


@dataclass
class ModelInfo:
    path: Path
    chat_template: str | None = None
    trust_remote_code: bool = False
    # what the tokenizer and template gave (hashes, end-of-turn and stop ids), kept with the folder_signature they
    # were worked out for: the steps after prompts (merge, report) and `shardgen status` read them there instead of
    # loading the tokenizer
    cache: Path | None = None

    @classmethod
    def from_config(cls, model_cfg: ModelConfig, cache: Path | None = None) -> "ModelInfo":
        _require_model_folder(model_cfg.path)
        return cls(Path(model_cfg.path).resolve(), template_text(model_cfg.chat_template), model_cfg.trust_remote_code,
                   cache)

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
        """model/tokenizer/template hashes: any change makes every gen_key new (`model`: see weights_digest)."""
        return self._remembered("fingerprint", lambda: {
            "model": weights_digest(self.path),
            "tokenizer": _hash_files(self.path, TOKENIZER_FILES),
            "template": hashlib.sha256(self.template.encode()).hexdigest(),
        })

    @cached_property
    def _signature(self) -> str:
        return folder_signature(self.path, self.chat_template, self.trust_remote_code)

    def _remembered(self, name: str, work_out):
        """The fact `name` from the cache while the folder's signature is the one it was worked out for, else
        work_out()'s, added to the cache (read again first: work_out may have added facts of its own)."""
        if name in (facts := self._cached_facts()):
            return facts[name]
        value = work_out()
        if self.cache is not None:
            # jobs may write it at once: the last one stays, and a fact it lacks is worked out again
            with suppress(OSError):  # a read-only results folder (`shardgen status` on a finished run): not kept
                self.cache.parent.mkdir(parents=True, exist_ok=True)
                replace_text(json.dumps({"signature": self._signature, "facts": {**self._cached_facts(), name: value}}),
                             self.cache)
        return value

    def _cached_facts(self) -> dict:
        try:
            cached = json.loads(self.cache.read_text()) if self.cache else {}
            return cached["facts"] if cached.get("signature") == self._signature else {}
        except (OSError, ValueError, AttributeError, KeyError, TypeError):  # none yet, or not what this writes
            return {}

    def record(self) -> dict:
        """The model as the manifest records it: folder, hashes (and what the model hash covers), stop ids."""
        return {"path": str(self.path), **self.fingerprint, "model_hash_covers": MODEL_HASH_COVERS,
                "stop_token_ids": self.stop_token_ids}

    @cached_property
    def served_sampling(self) -> dict[str, tuple]:
        """The model's sampling as served: field -> (value, origin), from its generation config (shardgen.sampling)."""
        return served(self.path)

    @cached_property
    def stop_token_ids(self) -> list[int]:
        """The generation config's eos ids plus the template's end-of-turn token."""
        return self._remembered("stop_token_ids", self._stop_token_ids)

    def _stop_token_ids(self) -> list[int]:
        ids = []
        gen_config = self.path / "generation_config.json"
        eos = json.loads(gen_config.read_text()).get("eos_token_id") if gen_config.is_file() else None
        eos = self.tokenizer.eos_token_id if eos is None else eos
        ids += eos if isinstance(eos, list) else [eos] if eos is not None else []
        if self.end_of_turn_id is not None:
            ids.append(self.end_of_turn_id)
        return sorted(set(ids))

    @cached_property
    def end_of_turn_id(self) -> int | None:
        """The first special token the template puts right after an assistant turn's content: what a loader that
        re-renders a conversation ends (and trains) every assistant turn with."""
        return self._remembered("end_of_turn_id", self._end_of_turn_id)

    def _end_of_turn_id(self) -> int | None:
        marker = "shardgen-end-of-turn-probe"
        text = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": marker}], tokenize=False)
        tail = self.tokenizer(text[text.rindex(marker) + len(marker):], add_special_tokens=False).input_ids
        special = set(self.tokenizer.all_special_ids) | set(self.tokenizer.added_tokens_decoder)
        return next((t for t in tail if t in special), None)

    @cached_property
    def chat(self):
        from shardgen.model.chat import ChatEncoder

        return ChatEncoder.of(self.tokenizer, self.template)

    def encode(self, messages: list[dict], template_kwargs: dict) -> list[int]:
        return self.encode_batch([messages], template_kwargs)[0]

    def encode_batch(self, conversations: list[list[dict]], template_kwargs: dict) -> list[list[int]]:
        """Render with the chat template and tokenize, a batch at a time."""
        return self.chat.encode(conversations, template_kwargs)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)
