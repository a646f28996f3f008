"""`shardgen status`: progress of every shard from split metadata and the parts on disk (the parts index, checked
against them, with lost parts named), its state (waiting, starting, generating, down:CAUSE, done: from the
attempt's heartbeat; silent_s = seconds since its last sign of life), rate and ETA, and the current output
tokens/s and running requests from the newest telemetry part (SGLang; without telemetry, the attempt's average tokens/s from its parts). A shard that is down shows no rate,
tokens/s or running count: those describe a process that is gone. Where a part holds a turn after the first,
every shard also shows conversations (begun: its turn-1 rows), turns (committed) and max_turn, from the parts'
turn column. Rate and ETA count turns against turns_expected (every turn of every conversation, from the split
file's footer): a conversation that ends early leaves its later turns uncounted, so the ETA is an upper bound."""

import json
from contextlib import suppress
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from shardgen import heartbeat
from shardgen.attempts import read_attempts
from shardgen.layout import PARTS_INDEX, Layout, part_files, telemetry_files
from shardgen.split import expected_turns


LIVE_SECONDS = 120  # telemetry older than this says nothing about now (parts are written every 10 s while running)


def _read_index(shard_dir: Path) -> dict[str, dict]:
    index = {}
    if (shard_dir / PARTS_INDEX).exists():
        for line in (shard_dir / PARTS_INDEX).read_text().splitlines():
            with suppress(ValueError):
                entry = json.loads(line)
                index[entry["part"]] = entry
    return index


def _part_counts(shard_dir: Path) -> tuple[list[tuple[int, int, int]], list[str]]:
    """(rows, attempt, completion tokens) of every part on disk: from the parts index where its size matches,
    else from the part itself (a commit killed between its rename and the index line, or a changed file); and the
    parts that are lost: listed in the index but gone, or unreadable."""
    index = _read_index(shard_dir)
    counts, lost = [], []
    for path in part_files(shard_dir):
        entry = index.pop(path.name, None)
        if entry and entry.get("bytes", path.stat().st_size) == path.stat().st_size:
            counts.append((entry["rows"], entry["attempt"], entry.get("tokens", 0)))
            continue
        try:
            table = pq.read_table(path, columns=["attempt", "completion_tokens"])
        except (OSError, pa.ArrowException):
            lost.append(f"{path.name} unreadable")
            continue
        attempt = table["attempt"][0].as_py() if table.num_rows else 0
        counts.append((table.num_rows, attempt, sum(table["completion_tokens"].to_pylist())))
    lost += [f"{name} missing ({entry['rows']} rows)" for name, entry in index.items()]
    return counts, lost


def _committed(shard_dir: Path) -> tuple[int, dict, dict, list[str]]:
    rows_by: dict[int, int] = {}
    tokens_by: dict[int, int] = {}
    counts, lost = _part_counts(shard_dir)
    for rows, attempt, tokens in counts:
        rows_by[attempt] = rows_by.get(attempt, 0) + rows
        tokens_by[attempt] = tokens_by.get(attempt, 0) + tokens
    return sum(rows_by.values()), rows_by, tokens_by, lost


def _turns(shard_dir: Path) -> dict:
    """Conversations begun (turn-1 rows), turns committed and the highest turn, from the parts' turn column (parts
    written before the column existed count as first turns)."""
    conversations = turns = max_turn = 0
    for path in part_files(shard_dir):
        try:
            if "turn" not in pq.read_schema(path).names:
                rows = pq.read_metadata(path).num_rows
                conversations, turns, max_turn = conversations + rows, turns + rows, max(max_turn, 1 if rows else 0)
                continue
            values = [t or 1 for t in pq.read_table(path, columns=["turn"])["turn"].to_pylist()]  # null: a first turn
        except (OSError, pa.ArrowException):
            continue  # named as lost by _part_counts
        conversations += values.count(1)
        turns += len(values)
        max_turn = max([max_turn, *values])
    return {"conversations": conversations, "turns": turns, "max_turn": max_turn}


def _live(shard_dir: Path, now: datetime, since: datetime) -> dict:
    """Mean decode tok/s and the last running count in the newest telemetry part, if it is recent and written by
    the current attempt (not before `since`, its start)."""
    newest = max(telemetry_files(shard_dir), default=None)
    if newest is None:
        return {}
    rows = [r for r in pq.read_table(newest, columns=["ts", "kind", "running", "gen_throughput"]).to_pylist()
            if r["kind"] == "decode" and r["ts"] >= since]
    if not rows or (now - rows[-1]["ts"]).total_seconds() > LIVE_SECONDS:
        return {}
    return {"out_tok_per_s": round(sum(r["gen_throughput"] for r in rows) / len(rows)), "running": rows[-1]["running"]}


def shard_status(layout: Layout, shard: int, now: datetime) -> dict:
    prompts = pq.read_metadata(layout.split(shard)).num_rows
    turns = expected_turns(layout.split(shard))  # what parts count: one row per turn
    committed, by_attempt, tokens, lost = _committed(layout.shard_dir(shard))
    done = layout.done(shard).exists()
    row = {"shard": shard, "prompts": prompts, "turns_expected": turns, "committed": committed, "done": done,
           "state": "done" if done else "waiting", "rate_per_s": None, "eta_s": None, "out_tok_per_s": None,
           "running": None, "lost_parts": "; ".join(lost) or None, "silent_s": None}
    attempts = [] if done else read_attempts(layout.shard_dir(shard))
    if not attempts:
        return row
    last = attempts[-1]
    started = datetime.fromisoformat(last["started_at"])
    is_alive, last_sign = heartbeat.alive(layout.shard_dir(shard), last, now.timestamp())
    row["silent_s"] = round(now.timestamp() - (last_sign or started.timestamp()))
    if not is_alive:
        row["state"] = f"down:{last.get('cause') or 'killed'}"
        return row
    row["state"] = "generating" if "engine_started_at" in last else "starting"
    elapsed = (now - started).total_seconds()
    rows_now = by_attempt.get(last["attempt"], 0)
    if elapsed > 0 and rows_now:
        row["rate_per_s"] = round(rows_now / elapsed, 3)
        row["eta_s"] = round(max(0, turns - committed) / row["rate_per_s"])
        row["out_tok_per_s"] = round(tokens.get(last["attempt"], 0) / elapsed)
    row.update(_live(layout.shard_dir(shard), now, started))
    return row


def status(layout: Layout) -> list[dict]:
    now = datetime.now(timezone.utc)
    rows = [shard_status(layout, s, now) for s in layout.split_shards()]
    by_turn = [_turns(layout.shard_dir(row["shard"])) for row in rows]
    if any(t["max_turn"] > 1 for t in by_turn):  # multi-turn: progress by conversations and turns too
        for row, turns in zip(rows, by_turn):
            row.update(turns)
    if all(row["turns_expected"] == row["prompts"] for row in rows):  # one turn each: the column says nothing
        for row in rows:
            del row["turns_expected"]
    return rows
