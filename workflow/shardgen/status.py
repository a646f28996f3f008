"""`shardgen status`: progress of every shard from split metadata and the parts index, rate and ETA."""

import json
from contextlib import suppress
from datetime import datetime, timezone
from pathlib import Path

import pyarrow.parquet as pq

from shardgen.layout import Layout
from shardgen.attempts import read_attempts
from shardgen.parts import INDEX_NAME, part_files


def _part_counts(shard_dir: Path) -> list[tuple[int, int]]:
    """(rows, attempt) of every committed part: from the parts index, and from the footer of any part the index
    does not list (a commit killed between its rename and the index line)."""
    index_path = shard_dir / INDEX_NAME
    index = {}
    if index_path.exists():
        for line in index_path.read_text().splitlines():
            with suppress(ValueError):
                entry = json.loads(line)
                index[entry["part"]] = (entry["rows"], entry["attempt"])
    counts = []
    for path in part_files(shard_dir):
        if path.name not in index:
            meta = pq.read_metadata(path)
            stats = meta.row_group(0).column(meta.schema.names.index("attempt")).statistics if meta.num_rows else None
            index[path.name] = (meta.num_rows, stats.min if stats is not None and stats.has_min_max else 0)
        counts.append(index[path.name])
    return counts


def _committed_rows(shard_dir: Path) -> tuple[int, dict]:
    by_attempt: dict[int, int] = {}
    for rows, attempt in _part_counts(shard_dir):
        by_attempt[attempt] = by_attempt.get(attempt, 0) + rows
    return sum(by_attempt.values()), by_attempt


def shard_status(layout: Layout, shard: int, now: datetime) -> dict:
    prompts = pq.read_metadata(layout.split(shard)).num_rows
    committed, by_attempt = _committed_rows(layout.shard_dir(shard))
    row = {"shard": shard, "prompts": prompts, "committed": committed, "done": layout.done(shard).exists(),
           "rate_per_s": None, "eta_s": None}
    if row["done"]:
        row["committed"] = json.loads(layout.done(shard).read_text())["generated"]
    elif attempts := read_attempts(layout.shard_dir(shard)):
        last = attempts[-1]
        elapsed = (now - datetime.fromisoformat(last["started_at"])).total_seconds()
        rows_now = by_attempt.get(last["attempt"], 0)
        if elapsed > 0 and rows_now:
            row["rate_per_s"] = round(rows_now / elapsed, 3)
            row["eta_s"] = round(max(0, prompts - committed) / row["rate_per_s"])
    return row


def status(layout: Layout) -> list[dict]:
    now = datetime.now(timezone.utc)
    shards = sorted(int(p.stem.split("-")[1]) for p in layout.split_dir.glob("shard-*.parquet"))
    return [shard_status(layout, s, now) for s in shards]
