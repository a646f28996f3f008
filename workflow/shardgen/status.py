"""`shardgen status`: progress of every shard from split and part metadata (footers only), rate and ETA."""

import json
from datetime import datetime, timezone

import pyarrow.parquet as pq

from shardgen.layout import Layout
from shardgen.attempts import read_attempts
from shardgen.parts import part_files


def _committed_rows(parts) -> tuple[int, dict]:
    by_attempt: dict[int, int] = {}
    total = 0
    for path in parts:
        meta = pq.read_metadata(path)
        total += meta.num_rows
        if meta.num_rows:
            # each part holds rows of one attempt: read its first value from the column statistics
            stats = meta.row_group(0).column(meta.schema.names.index("attempt")).statistics
            attempt = stats.min if stats is not None and stats.has_min_max else 0
            by_attempt[attempt] = by_attempt.get(attempt, 0) + meta.num_rows
    return total, by_attempt


def shard_status(layout: Layout, shard: int, now: datetime) -> dict:
    prompts = pq.read_metadata(layout.split(shard)).num_rows
    committed, by_attempt = _committed_rows(part_files(layout.shard_dir(shard)))
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
