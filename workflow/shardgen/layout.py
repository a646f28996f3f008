"""Where every file lives under results_dir: the one place that knows the paths the contracts name, and how shards,
parts and telemetry parts are numbered. A shard argument is a number (formatted NNN) or, for the rules, the
`{shard}` wildcard (kept as it is)."""

from dataclasses import dataclass
from pathlib import Path

SHARD_WILDCARD = "{shard}"
SHARD_REGEX = r"\d{3}"  # what the wildcard matches: a shard's NNN
# A file's shard number for SQL's regexp_extract (group 1): a split file's, a telemetry part's.
SPLIT_FILE_SHARD_REGEX = r"shard-(\d+)\.parquet$"
TELEMETRY_FILE_SHARD_REGEX = r"shard-(\d+)/telemetry-\d+\.parquet$"
PARTS_INDEX = "parts-index.jsonl"
ATTEMPTS = "attempts.jsonl"
HEARTBEAT = "heartbeat.json"


def shard_id(shard: int | str) -> str:
    return f"{shard:03d}" if isinstance(shard, int) else shard


def shard_ids(n_shards: int) -> list[str]:
    return [shard_id(s) for s in range(n_shards)]


def shard_number(path: Path) -> int:
    """The shard of split/shard-NNN.parquet, generate/shard-NNN/ or its done file."""
    return int(Path(path).name.split(".")[0].split("-")[1])


def shard_file(split_dir: Path, shard: int | str) -> Path:
    return Path(split_dir) / f"shard-{shard_id(shard)}.parquet"


def prompt_table(prompts_dir: Path, name: str) -> Path:
    """prompts, rejected, duplicates or sources."""
    return Path(prompts_dir) / f"{name}.parquet"


# The files of one folder of parts (a shard's, or a tune setting's): part-NNNNN.parquet, telemetry-NNNNN.parquet.
def part_path(folder: Path, index: int) -> Path:
    return Path(folder) / f"part-{index:05d}.parquet"


def parts_glob(folder: Path) -> str:
    return str(Path(folder) / "part-*.parquet")


def part_files(folder: Path) -> list[Path]:
    return sorted(Path(folder).glob("part-*.parquet"))


def stale_part_temps(folder: Path) -> list[Path]:
    """Temp files of part commits killed before their rename."""
    return sorted(Path(folder).glob(".part-*.tmp"))


def parts_index_path(folder: Path) -> Path:
    """One line per committed part (its row and token counts): the checkpoint's cache of the parts."""
    return Path(folder) / PARTS_INDEX


def quarantine_dir(folder: Path) -> Path:
    """Where unreadable parts are moved (never deleted)."""
    return Path(folder) / "quarantine"


def attempts_path(folder: Path) -> Path:
    return Path(folder) / ATTEMPTS


def heartbeat_path(folder: Path) -> Path:
    """The running attempt's sign of life."""
    return Path(folder) / HEARTBEAT


def file_number(path: Path) -> int:
    """The NNNNN of part-NNNNN.parquet or telemetry-NNNNN.parquet."""
    return int(Path(path).stem.split("-")[1])


def next_number(files: list[Path]) -> int:
    return file_number(files[-1]) + 1 if files else 0


def telemetry_path(folder: Path, index: int) -> Path:
    return Path(folder) / f"telemetry-{index:05d}.parquet"


def telemetry_glob(folder: Path) -> str:
    return str(Path(folder) / "telemetry-*.parquet")


def telemetry_files(folder: Path) -> list[Path]:
    return sorted(Path(folder).glob("telemetry-*.parquet"))


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
        return sorted(self.split_dir.glob("shard-*.parquet"))

    def split_shards(self) -> list[int]:
        """The shards split wrote, by number."""
        return sorted(shard_number(p) for p in self.split_files())

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
    def merge_spill(self) -> Path:
        """DuckDB's temporary files while merge sorts and copies (removed after)."""
        return self.dataset_dir / ".merge-spill"

    @property
    def state_dir(self) -> Path:
        """shardgen's own files that are no step's output: the resolved configs, the status cache."""
        return self.root / ".shardgen"

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


@dataclass(frozen=True)
class ReportLayout:
    """A report folder (Layout.report_dir, or the one `shardgen report --out` names)."""
    root: Path

    @property
    def summary(self) -> Path:
        return self.root / "summary.json"

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def markdown(self) -> Path:
        return self.root / "report.md"

    @property
    def figures_dir(self) -> Path:
        return self.root / "figures"

    def figure(self, name: str) -> Path:
        return self.figures_dir / f"{name}.png"


@dataclass(frozen=True)
class TuneLayout:
    """A tune folder (Layout.tune_dir, or the one `shardgen tune --out` names): its plan, sample and ranking, and one
    folder per measured setting."""
    root: Path

    @property
    def plan(self) -> Path:
        return self.root / "plan.json"

    @property
    def sample(self) -> Path:
        return self.root / "sample.parquet"

    @property
    def summary(self) -> Path:
        return self.root / "tune.json"

    @property
    def ranking(self) -> Path:
        return self.root / "ranking.md"

    @property
    def best(self) -> Path:
        """The winner as a config fragment."""
        return self.root / "best.yaml"

    def setting_dir(self, name: str) -> Path:
        return self.root / name

    def result(self, name: str) -> Path:
        return self.setting_dir(name) / "result.json"

    def engine_log(self, name: str) -> Path:
        return self.setting_dir(name) / "engine.log"

    def parts_dir(self, name: str) -> Path:
        return self.setting_dir(name) / "parts"
