"""`shardgen tune`: a small grid of hybrid-Mamba settings on a sample of the real prompts, a fresh engine per setting
(one child process each), measured one setting per call so each call fits a job limit and the next resumes. Ranked
by steady decode tok/s; the best is written as a config fragment to pass after the main config file.

plan.py fixes what is measured, measure.py measures one setting, report.py ranks them and writes the fragment."""

from pathlib import Path

from shardgen.config import Config


def tune(config: Config, tune_dir: Path, options: dict, only: list[str] | None = None, count: int = 1,
         allow_numerics_change: bool = False) -> dict:
    """Measure up to `count` pending settings (0 = all of them), then rank everything measured so far. A setting
    that changes the model's numerics is ranked, and recommended only with `allow_numerics_change`."""
    # Imported here: `python -m shardgen.tune.measure` imports this package first, and must find measure not yet loaded.
    from shardgen.tune import report
    from shardgen.tune.measure import run_setting
    from shardgen.tune.plan import load_plan, pending

    plan = load_plan(config, tune_dir, options)
    for name in pending(plan, tune_dir, only)[:count or None]:
        run_setting(tune_dir, name)
    return report.write(tune_dir, plan, allow_numerics_change)
