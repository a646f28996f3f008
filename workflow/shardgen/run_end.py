"""What the workflow says once a run succeeds (the Snakefile's `onsuccess`): the lines a user must see that the
steps' logs alone would hold, since Snakemake shows a step's output only when it fails."""

import json

from shardgen.config import Config
from shardgen.layout import Layout
from shardgen.merge.exports import text_exports_note


def run_end_lines(config: Config, started: float) -> list[str]:
    """Where this run (started at `started`, a time.time()) merged the dataset: what the text exports left out."""
    layout = Layout(config.results)
    manifest = layout.exports_manifest
    if not manifest.is_file() or manifest.stat().st_mtime < started:
        return []
    note = text_exports_note(layout, json.loads(manifest.read_text())["text_exports"])
    return [note] if note else []
