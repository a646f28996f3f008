"""`shardgen merge`: check the prompt set against the current config, merge the dataset and write every export
and the exports' manifest."""

import sys
from pathlib import Path

from shardgen.config import Config
from shardgen.layout import Layout
from shardgen.merge.dataset import merge
from shardgen.merge.exports import ExportRules, write_manifest
from shardgen.merge.freshness import check_prompt_set
from shardgen.merge import uncaptured
from shardgen.merge.hidden_exports import TRAINERS


def hidden_line(merged: dict | None) -> str | None:
    """What the parts hold of hidden states and how to make a trainer's export, in one line; None when off."""
    if merged is None:
        return None
    held = (f"hidden states: {merged['turns_captured']} of the dataset's {merged['turns']} turns in "
            f"{merged['parts']['files']} parts' states files ({merged['parts']['bytes']:,} bytes)")
    if merged["unusable"]:
        return f"{held}; no export can be made: {merged['unusable']}"
    return f"{held}; a trainer's export: shardgen export-hidden --trainer {{{','.join(TRAINERS)}}}"


def run(config: Config, prompts: Path, sources: Path, dataset: Path, train: Path, failed: Path) -> dict:
    """The merge step of the workflow, over the prompt set `prompts` built from the sources `sources` lists;
    returns merge's record (rows, and what the text exports left out)."""
    layout = Layout(config.results)
    check_prompt_set(config, Path(prompts), Path(sources))
    record = merge(layout, Path(dataset), Path(train), Path(failed), rules=ExportRules.of(config))
    write_manifest(config, layout, record)
    for note in (uncaptured.line(config, record["capture_turns"]), hidden_line(record.get("hidden_states"))):
        if note:
            print(f"shardgen: {note}", file=sys.stderr)
    return record
