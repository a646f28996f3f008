import json
import os
import shutil
import signal
import subprocess
import sys
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "config" / "demo"
FAKE = Path(__file__).resolve().parent / "fake_sglang"


@pytest.fixture(scope="session")
def demo_model(tmp_path_factory) -> Path:
    from shardgen.demo_model import build

    return build(tmp_path_factory.mktemp("model") / "demo-model", DEMO / "corpus.txt")


@pytest.fixture
def make_config(tmp_path, demo_model):
    """A validated Config for the demo model, results under tmp_path, with the given sources and overrides."""
    from shardgen.config import Config

    def make(sources, **overrides):
        raw = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
        raw.update(results_dir=str(tmp_path / "results"), sources=sources)
        raw["model"]["path"] = str(demo_model)
        for key, value in overrides.items():
            raw[key] = {**raw[key], **value} if isinstance(value, dict) and isinstance(raw.get(key), dict) else value
        return Config.from_dict(raw)

    return make


@pytest.fixture
def write_jsonl(tmp_path):
    def write(name, rows):
        path = tmp_path / name
        path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
        return str(path)

    return write


def load_yaml_files(*paths) -> dict:
    """Config files merged the way Snakemake's --configfile merges them (later files update earlier, recursively)."""
    def update(base: dict, new: dict) -> None:
        for key, value in new.items():
            if isinstance(value, dict) and isinstance(base.get(key), dict):
                update(base[key], value)
            else:
                base[key] = value

    merged: dict = {}
    for path in paths:
        update(merged, yaml.safe_load(Path(path).read_text()) or {})
    return merged


def copy_workflow(dest: Path) -> Path:
    """The repository's workflow files (no results) in dest, for snakemake runs in isolation."""
    for name in ("Snakefile", "workflow", "config", "profiles", "envs"):
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy(src, dest / name)
    return dest


@contextmanager
def own_group(proc: subprocess.Popen, grace_s: float = 30.0):
    """A child started with start_new_session=True: when the block ends with the child still running (a timeout,
    a failed assertion), its whole process group is ended: SIGINT first (Snakemake then cancels its jobs), SIGKILL
    after grace_s. No snakemake outlives its test."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                pass
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # what is left of the group: the child's own children
        proc.wait()


@pytest.fixture
def fake_sglang(monkeypatch):
    """tests/fake_sglang imported as `sglang`, and no compiled-kernel cache variable set."""
    from shardgen.engines.kernel_cache import CACHE_VARS

    monkeypatch.syspath_prepend(str(FAKE))
    for name in [m for m in sys.modules if m == "sglang" or m.startswith("sglang.")]:
        monkeypatch.delitem(sys.modules, name)
    for var in CACHE_VARS:  # set then removed: monkeypatch restores each to its state before the test
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)
