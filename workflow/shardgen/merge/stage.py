"""`shardgen merge`: check the prompt set against the current config, merge the dataset and write every export
and the exports' manifest."""

import sys
from pathlib import Path

from shardgen.capture import HiddenCapture
from shardgen.config import Config
from shardgen.layout import Layout
from shardgen.merge.dataset import merge
from shardgen.merge.exports import ExportRules, write_manifest
from shardgen.merge.freshness import check_prompt_set
from shardgen.merge import uncaptured


def run(config: Config, prompts: Path, sources: Path, dataset: Path, train: Path, failed: Path) -> dict:
    """The merge step of the workflow, over the prompt set `prompts` built from the sources `sources` lists;
    returns merge's record (rows, and what the text exports left out)."""
    layout = Layout(config.results)
    check_prompt_set(config, Path(prompts), Path(sources))
    record = merge(layout, Path(dataset), Path(train), Path(failed), rules=ExportRules.of(config))
    write_manifest(config, layout, record)
    if HiddenCapture.of(config):  # the workflow's output, there even when no captured turn made an export
        layout.hidden_exports_dir.mkdir(parents=True, exist_ok=True)
    if note := uncaptured.line(config, record["capture_turns"]):
        print(f"shardgen: {note}", file=sys.stderr)
    return record
