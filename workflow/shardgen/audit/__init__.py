"""`shardgen audit`: how far an engine setting moves the numbers the dataset was generated with. A seeded sample of
the run's generated turns is re-scored prefill-only (each turn's exact prompt and answer in one forward pass:
Engine.score) under the run's own engine settings (`own`) and under each setting the user names, a fresh engine per
setting in a child process of its own (as `shardgen tune` runs them: SGLang takes its whole process tree down when
it fails, and frees the GPU only at exit). Per setting: how often the generated token is the re-scored argmax or in
its top k, how far the re-scored chosen-token logprobs are from those captured at generation, and from `own`'s.

settings.py reads the settings, sample.py draws the turns, score.py scores them under one setting, metrics.py
computes the figures, report.py writes summary.json and turns.parquet."""

import json
from pathlib import Path

from shardgen.store.atomic import write_text
from shardgen.capture import MAX_TOP_K, Capture
from shardgen.config import Config, ConfigError
from shardgen.layout import AuditLayout

DEFAULT_TOP_K = 20  # without capture to take k from


def top_k_of(config: Config, given: int | None) -> int:
    """The k of `in_top_k`: the one given, else capture's (where it was on with a k), else DEFAULT_TOP_K."""
    if given is None:
        capture = Capture.sidecar_of(config)  # capture.logprobs, or a source's own capture
        return capture.top_k if capture is not None and capture.top_k else DEFAULT_TOP_K
    if not 1 <= given <= MAX_TOP_K:
        raise ConfigError(f"--top-k {given}: the engines report between 1 and {MAX_TOP_K} top tokens a position "
                          "(shardgen.capture.MAX_TOP_K)")
    return given


def audit(config: Config, out: Path, *, sample: int, seed: int, top_k: int | None, against: list[str]) -> dict:
    """Score the sample under `own` and each setting of `against`, then write and return the summary. Every
    setting, k and the sample are checked before an engine starts."""
    # Imported here: `python -m shardgen.audit.score` imports this package first, and must find score not yet loaded.
    from shardgen.audit import report, settings
    from shardgen.audit.sample import write_sample
    from shardgen.audit.score import run_setting

    audit_dir = AuditLayout(out)
    planned = settings.plan_settings(config, against)
    plan = {"sample": sample, "seed": seed, "top_k": top_k_of(config, top_k), "settings": planned}
    plan["sample_rows"] = write_sample(config, audit_dir.sample, sample, seed)
    write_text(json.dumps(plan, indent=1), audit_dir.plan)
    outcomes = [run_setting(out, index) for index in range(len(planned))]
    return report.write(out, plan, outcomes)
