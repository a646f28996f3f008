"""The checkpoint's parts in DuckDB (generate/checkpoint.py is its owner; nothing else imports this module).
`parts_query` is the one way parts are read into DuckDB: every part's full rows (generate's outcomes and resume
points, merge, the report, user queries, tune) or its light columns (status, through checkpoint_cache.py), each row
with its file's path and row number. "Finished" and the winner rule are defined once, in
workflow/sql/internal/winners.sql (is_generated, is_ended, final_rows, winners); everything here asks those
queries, never a copy of its own."""

import glob
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa

from shardgen.store import db, tables
from shardgen.store.atomic import committed
from shardgen.generate.checkpoint_parts import quarantine, unreadable
from shardgen.layout import Layout

# A part's rows as the queries read them: its columns, the file it is in and its row number there.
FULL = tables.PART.append(pa.field("filename", pa.string())).append(pa.field("file_row_number", pa.int64()))
# What status's queries (winners.sql, shard_progress.sql, part_progress.sql) read of a part: no token lists or text.
LIGHT_COLUMNS = ("gen_key", "base_key", "turn", "attempt", "finish_reason", "finished_at", "prompt_tokens",
                 "completion_tokens", "error", "filename", "file_row_number")
LIGHT = pa.schema([FULL.field(name) for name in LIGHT_COLUMNS])


def parts_query(con: duckdb.DuckDBPyConnection, sources: list[str], schema: pa.Schema = FULL) -> str:
    """A SELECT of `schema`'s columns over the parts at `sources` (paths, or globs that match at least one part),
    read by column name: a part written before a column was added reads it as null."""
    listed = ", ".join(db.quote(source) for source in sources)
    source = f"read_parquet([{listed}], union_by_name = true, filename = true, file_row_number = true)"
    have = {row[0] for row in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
    columns = ", ".join(f'"{f.name}"' if f.name in have else f'CAST(NULL AS {db.duckdb_type(f.type)}) AS "{f.name}"'
                        for f in schema)
    return f"SELECT {columns} FROM {source}"


def define_parts(con: duckdb.DuckDBPyConnection, sources: list[str]) -> None:
    """`parts` in `con`: a view of the full rows of the parts at `sources` (paths or globs); with no part there, the
    contract's empty table."""
    if any(glob.glob(source) for source in sources):
        con.execute(f"CREATE OR REPLACE VIEW parts AS {parts_query(con, sources)}")
    else:
        db.create_empty(con, "parts", FULL)


def connect(layout: Layout, memory_limit: str | None = None) -> duckdb.DuckDBPyConnection:
    """The results tree in DuckDB (db.connect's views) with `parts`: every shard's parts, full rows."""
    con = db.connect(layout, memory_limit)
    define_parts(con, [layout.parts_glob])
    return con


def define_prompt_set(con: duckdb.DuckDBPyConnection, prompts: str) -> None:
    """Over the `parts` already in `con`: the prompt set `prompts` (SQL) in place of prompts.parquet, and the
    winners script run against it."""
    db.create_empty(con, "_prompts_contract", tables.PROMPTS)  # for prompts SQL that fills missing columns
    con.execute(f"CREATE VIEW prompts AS {prompts}")
    db.define_views(con, "winners")


def _with_winners(layout: Layout) -> duckdb.DuckDBPyConnection:
    con = connect(layout)
    db.define_views(con, "winners")
    return con


def open_parts(layout: Layout) -> duckdb.DuckDBPyConnection:
    """The results tree with the winners script run, for generate: an unreadable part is moved to quarantine (its
    rows are generated again). Status, which only reads, names unreadable parts instead (checkpoint_cache)."""
    try:
        return _with_winners(layout)
    except duckdb.Error:
        bad = unreadable(sorted(glob.glob(layout.parts_glob)))
        if not bad:
            raise
    for path, reason in bad.items():
        quarantine(Path(path), reason)
    return _with_winners(layout)


@dataclass
class Outcomes:
    """What every shard's parts say of each committed gen_key."""
    generated: set[str] = field(default_factory=set)
    ended: set[str] = field(default_factory=set)  # its conversation ended before this turn (context_exhausted)
    # turns judged again at their conversation's context now (winners.sql): generated but no longer fitting, or
    # ended but fitting now
    shrunk: set[str] = field(default_factory=set)
    grew: set[str] = field(default_factory=set)
    aborts: dict[str, int] = field(default_factory=dict)  # failed only, and how many times


def outcomes(layout: Layout) -> Outcomes:
    """Each committed gen_key's outcome, from every shard's parts (a damaged part is quarantined)."""
    con = open_parts(layout)
    found = Outcomes()
    for key, outcome, aborts in con.execute(db.prepared(con, "key_outcomes")).fetchall():
        if outcome == "generated":
            found.generated.add(key)
        elif outcome == "ended":
            found.ended.add(key)
        elif outcome == "shrunk":
            found.shrunk.add(key)
        elif outcome == "grew":
            found.grew.add(key)
        else:
            found.aborts[key] = aborts
    return found


def committed_turns(layout: Layout, conversation_ids: set[str]) -> dict[str, dict]:
    """gen_key -> the row a committed turn of these conversations counts by (its winner, else its recorded end),
    with `generated` (False: a recorded end), completion and output_ids: where each conversation resumes."""
    if not conversation_ids:
        return {}
    con = open_parts(layout)
    rows = db.query(con, "committed_turns", conversations=sorted(conversation_ids))
    return {row["gen_key"]: row for row in rows}


def shard_figures(layout: Layout, shard: int) -> dict:
    """The done record's figures of a shard from every shard's parts (a damaged part is quarantined), with its
    failed prompts (and the engine's message) written to generate/shard-NNN/failed.parquet, and the prefix cache's
    share per turn index (`prefix_cache_by_turn`: shard_prefix_cache.sql)."""
    con = open_parts(layout)
    con.execute(f"CREATE VIEW shard_prompts AS SELECT * FROM read_parquet({db.quote(layout.split(shard))})")
    with committed(layout.shard_failed(shard)) as tmp:
        con.execute(f"COPY ({db.prepared(con, 'shard_failed')}) TO {db.quote(tmp)} (FORMAT parquet)")
    return {**db.query(con, "shard_done", shard=shard)[0],
            "prefix_cache_by_turn": db.query(con, "shard_prefix_cache", shard=shard)}
