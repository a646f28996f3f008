"""`shardgen diagnose`: read engine logs (or a shard's telemetry and done file) and say what limits throughput,
with the evidence lines and the settings to change, and how close decode came to the GPU (efficiency.py).
diagnose_run reads a run, diagnose_rules judges it, diagnose_render writes the result as text; `--json` is
`report`'s dict. The names callers import (cli, forecast, efficiency_forecast, tests) are all importable here."""

from dataclasses import asdict
from pathlib import Path

from shardgen import ShardgenError
from shardgen.engines.registry import DEFAULT_BACKEND
from shardgen.layout import Layout
from shardgen.report import efficiency
from shardgen.report.diagnose_render import render
from shardgen.report.diagnose_rules import Finding, diagnose
from shardgen.report.diagnose_run import Run, read, read_log, read_shard

__all__ = ["Finding", "Run", "diagnose", "examine", "read", "read_log", "read_shard", "render", "report", "run"]


def examine(path: Path, model_dir: Path | None, gpu: str | None, peaks: dict | None = None,
            default_gpu: str | None = None, engine: str = DEFAULT_BACKEND) -> dict:
    """Findings and efficiency of one log (of an `engine` backend's engine) or shard folder. The GPU: `gpu`
    (--gpu), else the one the shard's done file names, else `default_gpu` (hardware.gpu)."""
    run = read(path, engine)
    eff, note = efficiency.describe(run.rows, run.facts, run.settings, model_dir, gpu or run.gpu or default_gpu,
                                    peaks)
    return {"findings": [asdict(f) for f in diagnose(run, eff)], "efficiency": eff, "efficiency_note": note}


def report(paths: list[Path], model_dir: Path | None = None, gpu: str | None = None, peaks: dict | None = None,
           default_gpu: str | None = None, engine: str = DEFAULT_BACKEND) -> dict:
    return {str(p): examine(p, model_dir, gpu, peaks, default_gpu, engine) for p in paths}


def run(paths: list[Path], layout: Layout, config=None, model: str | None = None, gpu: str | None = None) -> dict:
    """`shardgen diagnose`: the paths given, else every shard of the run with SGLang telemetry; the model and the
    fallback GPU, peaks and backend (whose logs these are) from the config when one is complete."""
    paths = paths or layout.shards_with_telemetry()
    if not paths:
        raise ShardgenError(f"nothing to diagnose: no shard in {layout.generate_dir} has SGLang telemetry (the CPU "
                            "engine writes none); give SGLang log files or shard folders, e.g. `shardgen diagnose "
                            "tests/data/sglang-logs/nh8b-no_buffer-default.log`")
    model = model or (config.model.path if config else None)
    peaks, fallback_gpu = (config.hardware.peaks, config.hardware.gpu) if config else ({}, None)
    return report(paths, Path(model) if model else None, gpu, peaks, fallback_gpu,
                  config.engine.backend if config else DEFAULT_BACKEND)
