"""Where every file lives under results_dir: the one place that knows the paths the contracts name."""

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Layout:
    root: Path

    @property
    def prompts_dir(self) -> Path:
        return self.root / "prompts"

    @property
    def prompts(self) -> Path:
        return self.prompts_dir / "prompts.parquet"

    @property
    def split_dir(self) -> Path:
        return self.root / "split"

    def split(self, shard: int) -> Path:
        return self.split_dir / f"shard-{shard:03d}.parquet"

    @property
    def generate_dir(self) -> Path:
        return self.root / "generate"

    def shard_dir(self, shard: int) -> Path:
        return self.generate_dir / f"shard-{shard:03d}"

    def done(self, shard: int) -> Path:
        return self.generate_dir / f"shard-{shard:03d}.done.json"

    @property
    def parts_glob(self) -> str:
        return str(self.generate_dir / "shard-*" / "part-*.parquet")

    @property
    def reset_dir(self) -> Path:
        return self.generate_dir / "reset"

    @property
    def dataset_dir(self) -> Path:
        return self.root / "dataset"

    @property
    def report_dir(self) -> Path:
        return self.root / "report"
