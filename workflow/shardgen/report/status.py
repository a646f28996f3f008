"""`shardgen status`: progress of every shard from split metadata and the parts on disk (the parts index, checked
against them, with lost parts named), its state (waiting, starting, generating, down:CAUSE, done: from the
attempt's heartbeat; silent_s = seconds since its last sign of life), rate and ETA, and the current output
tokens/s and running requests from the newest telemetry part (SGLang; without telemetry, the attempt's average
tokens/s from its parts). A shard that is down shows no rate, tokens/s or running count: those describe a process
that is gone. Where a part holds a turn after the first, every shard also shows conversations (begun: its turn-1
rows), turns (committed) and max_turn, from the parts' turn column (counted per part in the parts index). Rate and
ETA count turns against turns_expected (every turn of every conversation, from the split file's footer): a
conversation that ends early leaves its later turns uncounted, so the ETA is an upper bound."""

import json
from contextlib import suppress
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from shardgen.generate import heartbeat
from shardgen.generate.attempts import read_attempts
from shardgen.layout import PARTS_INDEX, Layout, part_files, telemetry_files
from shardgen.prompts.split import expected_turns


LIVE_SECONDS = 120  # telemetry older than this says nothing about now (parts are written every 10 s while running)


def _read_index(shard_dir: Path) -> dict[str, dict]:
    index = {}
    if (shard_dir / PARTS_INDEX).exists():
        for line in (shard_dir / PARTS_INDEX).read_text().splitlines():
            with suppress(ValueError):
                entry = json.loads(line)
                index[entry["part"]] = entry
    return index


def _read_part(path: Path) -> dict:
    """A part's index entry, from the part itself (parts written before the turn column count as first turns)."""
    names = pq.read_schema(path).names
    table = pq.read_table(path, columns=["attempt", "completion_tokens"] + (["turn"] if "turn" in names else []))
    turns = [t or 1 for t in table["turn"].to_pylist()] if "turn" in names else [1] * table.num_rows  # null: turn 1
    return {"rows": table.num_rows, "attempt": table["attempt"][0].as_py() if table.num_rows else 0,
            "tokens": sum(table["completion_tokens"].to_pylist()), "first_turns": turns.count(1),
            "max_turn": max(turns, default=0)}


def _part_entries(shard_dir: Path) -> tuple[list[dict], list[str]]:
    """rows, attempt, completion tokens, first turns and highest turn of every part on disk: from the parts index
    where its size matches (one small file, not every part, read each poll), else from the part itself (a commit
    killed between its rename and the index line, a changed file, an index line older than the turn counts); and
    the parts that are lost: listed in the index but gone, or unreadable."""
    index = _read_index(shard_dir)
    entries, lost = [], []
    for path in part_files(shard_dir):
        entry = index.pop(path.name, None)
        if entry and entry.get("bytes", path.stat().st_size) == path.stat().st_size and "max_turn" in entry:
            entries.append(entry)
            continue
        try:
            entries.append(_read_part(path))
        except (OSError, pa.ArrowException):
            lost.append(f"{path.name} unreadable")
    lost += [f"{name} missing ({entry['rows']} rows)" for name, entry in index.items()]
    return entries, lost


def _by_attempt(entries: list[dict], key: str) -> dict[int, int]:
    totals: dict[int, int] = {}
    for entry in entries:
        totals[entry["attempt"]] = totals.get(entry["attempt"], 0) + entry[key]
    return totals


def _turns(entries: list[dict]) -> dict:
    """Conversations begun (turn-1 rows), turns committed and the highest turn."""
    return {"conversations": sum(e["first_turns"] for e in entries), "turns": sum(e["rows"] for e in entries),
            "max_turn": max((e["max_turn"] for e in entries), default=0)}


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
    entries, lost = _part_entries(layout.shard_dir(shard))
    by_attempt, tokens = _by_attempt(entries, "rows"), _by_attempt(entries, "tokens")
    committed = sum(by_attempt.values())
    done = layout.done(shard).exists()
    row = {"shard": shard, "prompts": prompts, "turns_expected": turns, "committed": committed, "done": done,
           "state": "done" if done else "waiting", "rate_per_s": None, "eta_s": None, "out_tok_per_s": None,
           "running": None, "lost_parts": "; ".join(lost) or None, "silent_s": None, **_turns(entries)}
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
    if all(row["max_turn"] <= 1 for row in rows):  # first turns only: conversations and turns repeat `committed`
        for row in rows:
            del row["conversations"], row["turns"], row["max_turn"]
    if all(row["turns_expected"] == row["prompts"] for row in rows):  # one turn each: the column says nothing
        for row in rows:
            del row["turns_expected"]
    return rows
