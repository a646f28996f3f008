"""Every state `shardgen status` can show is named in the README's line for the command (issue 38, item 10: a
shard after `reset` says `waiting`, which the list left out)."""

from datetime import datetime, timezone
from pathlib import Path

from shardgen.generate.attempts import INTERRUPTED
from shardgen.generate.reset import reset_shard
from shardgen.generate.progress import run_progress
from shardgen.report.status import STALE, shard_status

from helpers import stage

README = Path(__file__).resolve().parents[2] / "README.md"
# The states of a shard: status's own (waiting, done, stale) and its newest attempt's (attempts.liveness).
STATES = ("waiting", "starting", "generating", INTERRUPTED, "down", "done", STALE)


def test_the_readme_names_every_state_status_shows(make_config, write_jsonl):
    line = next(line for line in README.read_text().splitlines() if line.startswith("shardgen status "))
    assert [state for state in STATES if state not in line] == []

    layout = stage(make_config([{"name": "a", "path": write_jsonl("a.jsonl", [{"query": "Hi."}]),
                                 "format": "query_response"}]), 1)
    reset_shard(layout, 0)
    row = shard_status(layout, 0, run_progress(layout).shards[0], datetime.now(timezone.utc))
    assert row["state"] == "waiting"  # the state the README must name: after `reset`
