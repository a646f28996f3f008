"""The folders a stage may be pointed at (`shardgen report --out`, `shardgen tune --out`, `shardgen audit --out`): a
report's files, a tune folder's and an audit folder's, wherever they are."""

from dataclasses import dataclass
from pathlib import Path


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
class SettingsLayout:
    """A folder where engine settings are run over one sample (tune, audit): its plan and sample, and one folder per
    setting, each with its engine's log."""
    root: Path

    @property
    def plan(self) -> Path:
        return self.root / "plan.json"

    @property
    def sample(self) -> Path:
        return self.root / "sample.parquet"

    def setting_dir(self, key) -> Path:
        raise NotImplementedError

    def engine_log(self, key) -> Path:
        return self.setting_dir(key) / "engine.log"


@dataclass(frozen=True)
class TuneLayout(SettingsLayout):
    """A tune folder (Layout.tune_dir, or the one `shardgen tune --out` names): its plan, sample and ranking, and one
    folder per measured setting, by name."""

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

    def parts_dir(self, name: str) -> Path:
        return self.setting_dir(name) / "parts"


@dataclass(frozen=True)
class AuditLayout(SettingsLayout):
    """An audit folder (Layout.audit_dir, or the one `shardgen audit --out` names): its plan and sample, the two
    reports, and one folder per setting scored (by its place in the plan: a setting's text may hold any character)."""

    @property
    def summary(self) -> Path:
        return self.root / "summary.json"

    @property
    def turns(self) -> Path:
        return self.root / "turns.parquet"

    def setting_dir(self, index: int) -> Path:
        return self.root / f"setting-{index}"

    def scores(self, index: int) -> Path:
        """A setting's scores of the sample's turns (audit/score.py writes them)."""
        return self.setting_dir(index) / "scores.parquet"

    def engine(self, index: int) -> Path:
        """What the setting's engine ran with (its numerics)."""
        return self.setting_dir(index) / "engine.json"
