"""How shards, parts and telemetry parts are named and numbered inside any folder of parts (a shard's, a tune
setting's): what the checkpoint, status and the benchmarks use where no results folder is at hand."""

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


def shard_files(split_dir: Path) -> list[Path]:
    """Every shard file in a split folder, by name."""
    return sorted(Path(split_dir).glob("shard-*.parquet"))


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


def hidden_part_path(part: Path) -> Path:
    """The hidden states committed with a part (config capture.hidden_states): part-NNNNN.hidden.safetensors."""
    return Path(part).with_name(f"{Path(part).stem}.hidden.safetensors")


def hidden_part_files(folder: Path) -> list[Path]:
    return sorted(Path(folder).glob("part-*.hidden.safetensors"))


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
