"""`shardgen status`: every shard's progress against the current prompt set (its split file's conversations; rows
made for other prompts, after a sampling, model or template change, are stale: counted apart, never as progress),
from the shard's checkpoint; lost parts named; its state (waiting, starting, generating, interrupted, down:CAUSE,
done: from its newest attempt; stale: a done file, but the current prompt set has uncommitted work (a sampling change
since, or a lost part), or, given the run's config, the config asks for prompts the prompt set was not built
with (config_changed: its prompts whose gen_key the config now gives otherwise; a rerun regenerates them);
silent_s = seconds since its last sign of life), and the current output tokens/s and running requests from the
newest telemetry part (SGLang; without telemetry, the attempt's average tokens/s from its parts). The ETA, its
rate and the tokens it has left are eta.annotate's. A shard that is not running shows no rate, tokens/s or
running count: those describe a process that is gone. Where a generated turn is after the first, every shard
also shows conversations (begun), turns (generated) and max_turn (the highest generated turn: a conversation
ended by context_exhausted counts to its last generated turn, not the one that did not fit). Rate and ETA count
turns against turns_expected (every turn of every conversation, from the split file's footer): a conversation that
ends early leaves its later turns uncounted, so the ETA is an upper bound."""

from datetime import datetime, timezone
from pathlib import Path

import pyarrow.parquet as pq

from shardgen.generate import attempts, checkpoint
from shardgen.generate.progress import ShardProgress, run_progress
from shardgen.layout import Layout, telemetry_files
from shardgen.merge.freshness import ConfigChanges
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


def shard_status(layout: Layout, shard: int, progress: ShardProgress, now: datetime,
                 changes: ConfigChanges | None = None) -> dict:
    """changes: what the run's config asks for that the prompt set lacks (None where no config was given: the
    prompt set is then all there is to judge by)."""
    turns = expected_turns(layout.split(shard))  # what parts count: one row per turn
    # A done file says the shard finished its prompt set when it was written; it is done now only while every
    # current conversation has an outcome (a sampling change, or a lost part, leaves work uncommitted under it) and
    # the config asks for no other prompts (a change the prompt set has not been rebuilt for yet).
    done_file = checkpoint.ShardCheckpoint(layout, shard).is_done()
    done = done_file and progress.missing == 0 and not (changes and changes.stale(shard))
    row = {"shard": shard, "prompts": pq.read_metadata(layout.split(shard)).num_rows, "turns_expected": turns,
           "committed": progress.committed, "done": done, "state": "done" if done else "waiting",
           "tokens_left": None, "commit_tok_per_s": None, "eta_s": None, "out_tok_per_s": None, "running": None,
           "lost_parts": "; ".join(progress.lost) or None, "silent_s": None, "stale_rows": progress.stale_rows,
           "config_changed": changes.per_shard.get(shard, 0) if changes else 0,
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
    if elapsed > 0 and mine:
        row["out_tok_per_s"] = round(sum(c.output_tokens for c in mine) / elapsed)
    row.update(_live(layout.shard_dir(shard), now, datetime.fromtimestamp(life["started"], timezone.utc)))
    return row


def status(layout: Layout, changes: ConfigChanges | None = None) -> list[dict]:
    """Every split shard's row; with `changes` (merge.freshness.changed_by_config of the run's config), judged
    against the current config too."""
    now = datetime.now(timezone.utc)
    run = run_progress(layout)
    rows = [shard_status(layout, s, run.shards[s], now, changes) for s in layout.split_shards()]
    if all(row["max_turn"] <= 1 for row in rows):  # first turns only: conversations and turns repeat `committed`
        for row in rows:
            del row["conversations"], row["turns"], row["max_turn"]
    if all(row["turns_expected"] == row["prompts"] for row in rows):  # one turn each: the column says nothing
        for row in rows:
            del row["turns_expected"]
    for key in ("stale_rows", "config_changed"):  # shown where some shard has one
        if not any(row[key] for row in rows):
            for row in rows:
                del row[key]
    return rows


def _per_shard(counts: dict[int, int]) -> str:
    return ", ".join(f"shard {shard}: {n}" for shard, n in counts.items())


def config_line(changes: ConfigChanges) -> str | None:
    """The status's last line where the config asks for prompts the prompt set was not built with."""
    changed = {shard: n for shard, n in changes.per_shard.items() if n}
    refit = {shard: n for shard, n in changes.refit.items() if n}
    if not (changed or refit or changes.missing_sources or changes.reread_sources or changes.context_length):
        return None
    parts = [f"{sum(changed.values())} prompts of the prompt set now have other settings or no source ("
             f"{_per_shard(changed)})"] if changed else []
    if changes.context_length:
        built, now = changes.context_length
        parts += [f"{sum(refit.values())} conversations end elsewhere under model.context_length {now} (the prompt "
                  f"set was built for {built}" + (f"; {_per_shard(refit)})" if refit else ")")]
    parts += [f"the prompt set lacks source(s) {', '.join(changes.missing_sources)}"] if changes.missing_sources else []
    parts += [f"source(s) {', '.join(changes.reread_sources)} now read other rows (their `limit` changed)"
              ] if changes.reread_sources else []
    return (f"config: {'; '.join(parts)}; a run of the workflow rebuilds the prompt set and generates them "
            "(`snakemake -n` lists the jobs)")
