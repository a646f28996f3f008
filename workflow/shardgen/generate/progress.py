"""Each shard's progress against the current prompt set, as `shardgen status` and its ETA read it: the parts' light
columns and the winners script as the checkpoint gives them (checkpoint.open_light), over the split files'
conversations; rows made for other prompts are stale and counted apart."""

import os
from dataclasses import dataclass, field

import duckdb

from shardgen.store import db, tables
from shardgen.generate import checkpoint
from shardgen.layout import SPLIT_FILE_SHARD_REGEX, Layout


@dataclass(frozen=True)
class Commit:
    """A committed part as the ETA times it: its attempt, when it was committed, and its rows and output tokens
    of the current prompt set."""
    attempt: int
    at: float
    rows: int
    output_tokens: int


@dataclass
class ShardProgress:
    """One shard's parts against the current prompt set (its split file's conversations). committed: its turns
    with a committed row (generated, ended or aborted); conversations: those begun; turns, max_turn and
    output_tokens: its generated turns; budget_spent: the max_new_tokens of its committed turns; commits: the
    parts in its folder, oldest first; stale_rows: rows in its folder made for other prompts (another model,
    template or sampling, or prompts no longer configured; winners.sql's `stale_rows`); lost: parts listed in its
    index but gone, or unreadable; missing: its conversations with no outcome yet (none: its work is all committed,
    as a done file of this prompt set says)."""
    missing: int = 0
    committed: int = 0
    conversations: int = 0
    turns: int = 0
    max_turn: int = 0
    output_tokens: int = 0
    budget_spent: int = 0
    commits: list[Commit] = field(default_factory=list)
    stale_rows: int = 0
    lost: list[str] = field(default_factory=list)


def _split_prompts(layout: Layout) -> str:
    """The current prompt set as the split files hold it, each row with its shard (split_shard); a column a split
    file lacks (one written by an older version) reads as null."""
    files = ", ".join(db.quote(layout.split(s)) for s in layout.split_shards())
    shard = f"CAST(regexp_extract(filename, {db.quote(SPLIT_FILE_SHARD_REGEX)}, 1) AS INTEGER)"
    return (f"SELECT *, {shard} AS split_shard FROM "
            "(SELECT * FROM _prompts_contract UNION ALL BY NAME "
            f"SELECT * FROM read_parquet([{files}], filename = true))")


@dataclass
class RunProgress:
    shards: dict[int, ShardProgress]
    stale_rows: int  # in every shard folder, those of shards the split no longer has included


def _snapshot(layout: Layout) -> tuple:
    """What run_progress() reads, by name, size and modification time: equal snapshots give equal progress."""
    splits = []
    for path in layout.split_files():
        try:
            st = os.stat(path)
        except FileNotFoundError:  # moved away meanwhile: the next snapshot differs anyway
            continue
        splits.append((str(path), st.st_size, st.st_mtime_ns))
    return checkpoint.stamp(layout), tuple(splits)


_last_progress: list = [None, None]  # (layout and snapshot, progress): `status` then its ETA read the parts once


def run_progress(layout: Layout) -> RunProgress:
    """Every split shard's progress, counting only rows of the current prompt set (merge's rule: a row belongs to
    it when its conversation's key, base_key, is a current split row's gen_key), and the stale rows on disk."""
    key = (layout, _snapshot(layout))
    if _last_progress[0] != key:
        _last_progress[:] = key, _read_progress(layout)
    return _last_progress[1]


def _read_progress(layout: Layout) -> RunProgress:
    shards = {s: ShardProgress() for s in layout.split_shards()}
    if not shards:
        return RunProgress(shards, 0)
    # committed parts never change: their light columns come from each folder's status cache, plus the parts new since
    con, unreadable, mtimes = checkpoint.open_light(layout, _split_prompts(layout))
    for counts in db.query(con, "shard_progress"):
        for key in ("missing", "committed", "conversations", "turns", "max_turn", "output_tokens", "budget_spent"):
            setattr(shards[counts["shard"]], key, int(counts[key]))
    parts = {row["filename"]: row for row in db.query(con, "part_progress")}
    for shard, state in shards.items():
        shard_checkpoint = checkpoint.ShardCheckpoint(layout, shard)
        index = shard_checkpoint.index()
        names = set()
        for path in shard_checkpoint.parts():
            names.add(path.name)
            row = parts.get(str(path))
            if row is None:
                if str(path) in unreadable:
                    state.lost.append(f"{path.name} unreadable")
                continue
            at = mtimes[str(path)] if str(path) in mtimes else path.stat().st_mtime  # stat'ed once, by open_light
            state.commits.append(Commit(row["attempt"], at, row["rows"], int(row["output_tokens"])))
            state.stale_rows += row["stale_rows"]
        state.lost += [f"{name} missing ({entry['rows']} rows)" for name, entry in index.items()
                       if name not in names and not (shard_checkpoint.folder / name).exists()]
        state.commits.sort(key=lambda c: c.at)
    return RunProgress(shards, sum(int(row["stale_rows"]) for row in parts.values()))


def built_context_length(layout: Layout) -> int | None:
    """The model.context_length the split's prompt set was built for (None: no split, or one written before it was
    kept)."""
    if not layout.split_shards():
        return None
    con = duckdb.connect()
    db.create_empty(con, "_prompts_contract", tables.PROMPTS)  # a split file without the column reads it as null
    return con.execute(f"SELECT max(context_length) FROM ({_split_prompts(layout)})").fetchall()[0][0]


def refit(layout: Layout, context_length: int) -> dict[int, int]:
    """Per split shard, its conversations that `context_length` ends elsewhere than the context the prompt set was
    built for (refit.sql): what a rerun at that model.context_length changes. Committed parts are read as status
    reads them (their light columns, through the status cache)."""
    con, _, _ = checkpoint.open_light(layout, _split_prompts(layout))
    return {row["shard"]: int(row["conversations"])
            for row in db.query(con, "refit", context_length=context_length)}
