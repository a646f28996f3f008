"""`shardgen status`: every shard's progress against the current prompt set (its split file's conversations; rows
made for other prompts, after a sampling, model or template change, are stale: counted apart, never as progress),
from the shard's checkpoint; lost parts named; its state (waiting, starting, generating, interrupted, down:CAUSE,
done: from its newest attempt; stale: a done file, but the current prompt set has uncommitted work (a sampling change
since, or a lost part); silent_s = seconds since its last sign of life), rate and ETA, and the current
output tokens/s and running requests from the newest telemetry part (SGLang; without telemetry, the attempt's
average tokens/s from its parts). A shard that is not running shows no rate, tokens/s or running count: those
describe a process that is gone. Where a generated turn is after the first, every shard also shows conversations
(begun), turns (generated) and max_turn (the highest generated turn: a conversation ended by context_exhausted
counts to its last generated turn, not the one that did not fit). Rate and ETA count turns against turns_expected
(every turn of every conversation, from the split file's footer): a conversation that ends early leaves its later
turns uncounted, so the ETA is an upper bound."""

from datetime import datetime, timezone
from pathlib import Path

import pyarrow.parquet as pq

from shardgen.generate import attempts, checkpoint
from shardgen.generate.progress import ShardProgress, run_progress
from shardgen.layout import Layout, telemetry_files
from shardgen.prompts.split import expected_turns


STALE = "stale"  # a done file whose prompt set has uncommitted work: a rerun generates it
LIVE_SECONDS = 120  # telemetry older than this says nothing about now (parts are written every 10 s while running)


def _live(shard_dir: Path, now: datetime, since: datetime) -> dict:
    """Mean decode tok/s and the last running count in the newest telemetry part, if it is recent and written by
    the current attempt (not before `since`, its start)."""
    newest = max(telemetry_files(shard_dir), default=None)
    if newest is None:
        return {}
    since = since.replace(microsecond=since.microsecond // 1000 * 1000)  # telemetry times are to the millisecond
    rows = [r for r in pq.read_table(newest, columns=["ts", "kind", "running", "gen_throughput"]).to_pylist()
            if r["kind"] == "decode" and r["ts"] >= since]
    if not rows or (now - rows[-1]["ts"]).total_seconds() > LIVE_SECONDS:
        return {}
    return {"out_tok_per_s": round(sum(r["gen_throughput"] for r in rows) / len(rows)), "running": rows[-1]["running"]}


def shard_status(layout: Layout, shard: int, progress: ShardProgress, now: datetime) -> dict:
    turns = expected_turns(layout.split(shard))  # what parts count: one row per turn
    # A done file says the shard finished its prompt set when it was written; it is done now only while every
    # current conversation has an outcome (a sampling change, or a lost part, leaves work uncommitted under it).
    done_file = checkpoint.ShardCheckpoint(layout, shard).is_done()
    done = done_file and progress.missing == 0
    row = {"shard": shard, "prompts": pq.read_metadata(layout.split(shard)).num_rows, "turns_expected": turns,
           "committed": progress.committed, "done": done, "state": "done" if done else "waiting",
           "rate_per_s": None, "eta_s": None, "out_tok_per_s": None, "running": None,
           "lost_parts": "; ".join(progress.lost) or None, "silent_s": None, "stale_rows": progress.stale_rows,
           "conversations": progress.conversations, "turns": progress.turns, "max_turn": progress.max_turn}
    life = None if done else attempts.liveness(layout.shard_dir(shard), now.timestamp())
    if life is None or life["state"] == attempts.FINISHED:
        if done_file and not done:  # its last attempt finished an older prompt set, or a part is gone since
            row["state"] = STALE
        return row
    row.update(state=life["state"], silent_s=life["silent_s"])
    if not life["running"]:
        return row
    elapsed = now.timestamp() - life["started"]
    mine = [c for c in progress.commits if c.attempt == life["attempt"]["attempt"]]
    rows_now = sum(c.rows for c in mine)
    if elapsed > 0 and rows_now:
        row["rate_per_s"] = round(rows_now / elapsed, 3)
        row["eta_s"] = round(max(0, turns - progress.committed) / row["rate_per_s"])
        row["out_tok_per_s"] = round(sum(c.output_tokens for c in mine) / elapsed)
    row.update(_live(layout.shard_dir(shard), now, datetime.fromtimestamp(life["started"], timezone.utc)))
    return row


def status(layout: Layout) -> list[dict]:
    now = datetime.now(timezone.utc)
    run = run_progress(layout)
    rows = [shard_status(layout, s, run.shards[s], now) for s in layout.split_shards()]
    if all(row["max_turn"] <= 1 for row in rows):  # first turns only: conversations and turns repeat `committed`
        for row in rows:
            del row["conversations"], row["turns"], row["max_turn"]
    if all(row["turns_expected"] == row["prompts"] for row in rows):  # one turn each: the column says nothing
        for row in rows:
            del row["turns_expected"]
    if not any(row["stale_rows"] for row in rows):
        for row in rows:
            del row["stale_rows"]
    return rows
