"""Where every file lives under results_dir: the one place that knows the paths the contracts name, and how shards,
parts and telemetry parts are numbered. A shard argument is a number (formatted NNN) or, for the rules, the
`{shard}` wildcard (kept as it is)."""

from dataclasses import dataclass
from pathlib import Path

from shardgen.layout.folders import (SHARD_WILDCARD, SHARD_REGEX, SPLIT_FILE_SHARD_REGEX, TELEMETRY_FILE_SHARD_REGEX,
                                     PARTS_INDEX, ATTEMPTS, HEARTBEAT, shard_id, shard_ids, shard_number, shard_file,
                                     shard_files,
                                     prompt_table, part_path, hidden_part_path, hidden_part_files, parts_glob,
                                     part_files, stale_part_temps,
                                     parts_index_path, quarantine_dir, attempts_path, heartbeat_path, file_number,
                                     next_number, telemetry_path, telemetry_glob, telemetry_files)
from shardgen.layout.stages import AuditLayout, ReportLayout, TuneLayout

# What the package's callers import from `shardgen.layout`.
__all__ = ["AuditLayout", "Layout", "ReportLayout", "TuneLayout", "SHARD_WILDCARD", "SHARD_REGEX",
           "SPLIT_FILE_SHARD_REGEX", "TELEMETRY_FILE_SHARD_REGEX", "PARTS_INDEX", "ATTEMPTS", "HEARTBEAT", "shard_id",
           "shard_ids",
           "shard_number", "shard_file", "shard_files", "prompt_table", "part_path", "hidden_part_path",
           "hidden_part_files",
           "parts_glob", "part_files", "stale_part_temps",
           "parts_index_path", "quarantine_dir", "attempts_path", "heartbeat_path", "file_number", "next_number",
           "telemetry_path", "telemetry_glob", "telemetry_files"]


@dataclass(frozen=True)
class Layout:
    root: Path

    @property
    def prompts_dir(self) -> Path:
        return self.root / "prompts"

    @property
    def prompts(self) -> Path:
        return prompt_table(self.prompts_dir, "prompts")

    def prompt_table(self, name: str) -> Path:
        return prompt_table(self.prompts_dir, name)

    @property
    def split_dir(self) -> Path:
        return self.root / "split"

    def split(self, shard: int | str) -> Path:
        return shard_file(self.split_dir, shard)

    def split_files(self) -> list[Path]:
        return shard_files(self.split_dir)

    def split_shards(self) -> list[int]:
        """The shards split wrote, by number."""
        return sorted(shard_number(p) for p in self.split_files())

    def holds_a_run(self) -> bool:
        """Whether a run has written here: a prompt set, a split or generated parts."""
        return self.prompts.is_file() or bool(self.split_files()) or any(self.generate_dir.glob("shard-*/part-*"))

    @property
    def generate_dir(self) -> Path:
        return self.root / "generate"

    def shard_dir(self, shard: int | str) -> Path:
        return self.generate_dir / f"shard-{shard_id(shard)}"

    def done(self, shard: int | str) -> Path:
        return self.generate_dir / f"shard-{shard_id(shard)}.done.json"

    def shard_failed(self, shard: int | str) -> Path:
        return self.shard_dir(shard) / "failed.parquet"

    @staticmethod
    def done_of(shard_dir: Path) -> Path:
        """The done file beside a shard folder."""
        return Path(shard_dir).with_name(f"{Path(shard_dir).name}.done.json")

    @property
    def retry(self) -> Path:
        return self.generate_dir / "retry.json"

    @property
    def parts_glob(self) -> str:
        return str(self.generate_dir / "shard-*" / "part-*.parquet")

    @property
    def hidden_parts_glob(self) -> str:
        """Every shard's committed hidden-state files (config capture.hidden_states), one beside each part."""
        return str(self.generate_dir / "shard-*" / "part-*.hidden.safetensors")

    @property
    def telemetry_glob(self) -> str:
        return str(self.generate_dir / "shard-*" / "telemetry-*.parquet")

    def shards_with_telemetry(self) -> list[Path]:
        return sorted({p.parent for p in self.generate_dir.glob("shard-*/telemetry-*")})

    def status_cache(self, shard_dir: Path) -> Path:
        """The light columns of a shard folder's committed parts as `shardgen status` read them last
        (generate/checkpoint_cache.py): a cache only, rebuilt from the parts whenever it is missing, damaged or out
        of date. Not in the shard folder: that is the generate rule's input, and a write there would rerun the shard."""
        return self.state_dir / "status-cache" / f"{Path(shard_dir).name}.parquet"

    @property
    def reset_dir(self) -> Path:
        return self.generate_dir / "reset"

    @property
    def dataset_dir(self) -> Path:
        return self.root / "dataset"

    @property
    def dataset(self) -> Path:
        return self.dataset_dir / "data.parquet"

    @property
    def dataset_glob(self) -> str:
        return str(self.dataset_dir / "*.parquet")

    @property
    def train(self) -> Path:
        return self.dataset_dir / "train.jsonl"

    @property
    def exports_dir(self) -> Path:
        """Outside dataset/: its *.parquet is the dataset."""
        return self.root / "exports"

    def export(self, name: str) -> Path:
        """One conversation-level export (exports.EXPORTS names them): sharegpt.jsonl, messages.jsonl, tokens.jsonl
        or tokens.parquet."""
        return self.exports_dir / name

    @property
    def hidden_exports_dir(self) -> Path:
        """The hidden-state exports' folder: one folder per trainer in it."""
        return self.exports_dir / "hidden"

    def hidden_export(self, trainer: str) -> Path:
        """The hidden-state export for one trainer's offline reader: specforge, specforge_dflash or speculators (a
        folder)."""
        return self.hidden_exports_dir / trainer

    @property
    def exports_manifest(self) -> Path:
        """The exports' sidecar: what the rows were rendered with (not row fields: trainers read those)."""
        return self.exports_dir / "manifest.json"

    @property
    def failed(self) -> Path:
        return self.root / "merge" / "failed.parquet"

    @property
    def report_dir(self) -> Path:
        return self.root / "report"

    @property
    def report(self) -> "ReportLayout":
        return ReportLayout(self.report_dir)

    @property
    def tune_dir(self) -> Path:
        return self.root / "tune"

    @property
    def audit_dir(self) -> Path:
        return self.root / "audit"

    @property
    def merge_spill(self) -> Path:
        """DuckDB's temporary files while merge sorts and copies (removed after)."""
        return self.dataset_dir / ".merge-spill"

    @property
    def state_dir(self) -> Path:
        """shardgen's own files that are no step's output: the resolved configs, the status cache, the model's
        cache."""
        return self.root / ".shardgen"

    @property
    def model_cache(self) -> Path:
        """What the target's tokenizer and template gave, and the folder signature it holds for
        (model.target.ModelInfo)."""
        return self.state_dir / "model-cache.json"

    def resolved_config(self, digest: str) -> Path:
        """The resolved config the workflow hands its steps, named by its content."""
        return self.state_dir / f"config-{digest}.json"

    @property
    def demo_model_dir(self) -> Path:
        return self.root / "demo-model"

    def log(self, step: str, shard: int | str | None = None) -> Path:
        return self.root / "logs" / (f"{step}.log" if shard is None else f"{step}/shard-{shard_id(shard)}.log")

    def benchmark(self, step: str, shard: int | str | None = None) -> Path:
        return self.root / "benchmarks" / (f"{step}.tsv" if shard is None else f"{step}/shard-{shard_id(shard)}.tsv")
