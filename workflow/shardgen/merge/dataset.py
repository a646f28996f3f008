"""Stage 4: the final dataset (earliest committed row of each current gen_key, each answer split at the model's
reasoning tags) and the exports, streamed by DuckDB; refuses to finish while an accepted prompt is neither
generated nor failed."""

import shutil
from pathlib import Path

from shardgen import ShardgenError
from shardgen.store import db
from shardgen.store.atomic import committed
from shardgen.generate import checkpoint
from shardgen.merge import reasoning, uncaptured
from shardgen.merge.exports import ExportRules, sharegpt_counts, write_exports
from shardgen.merge import hidden_exports
from shardgen.layout import Layout

ROWS_PER_THREADS = 1_000_000


class AccountingError(ShardgenError, RuntimeError):
    pass


def _copy(con, query: str, path: Path, fmt: str) -> None:
    # small row groups: the COPY buffers one per thread, heavy with token lists
    options = "FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 16384" if fmt == "parquet" else "FORMAT json"
    with committed(path) as tmp:
        con.execute(f"COPY ({query}) TO {db.quote(tmp)} ({options})")


def _copy_dataset(con, path: Path) -> None:
    """Above ROWS_PER_THREADS prompts the join that pairs each prompt with its winning part row (both sides with
    token lists) spills to disk; with one thread its spilled partitions stay within the memory limit (with two, 4M
    rows ran out of memory at 1 GB), at the cost of time."""
    rows = con.execute("SELECT count(*) FROM winners").fetchall()[0][0]
    if rows > ROWS_PER_THREADS:
        con.execute("SET threads = 1")
    _copy(con, db.sql("dataset_split"), path, "parquet")
    con.execute("RESET threads")


def merge(layout: Layout, dataset: Path, train: Path, failed: Path, memory_limit: str = "1GB",
          rules: ExportRules | None = None) -> dict:
    """Within memory_limit whatever the number of rows: DuckDB spills its joins and sorts to a temp folder. rules:
    the config's reasoning tags and on_length rule (default: the schema's)."""
    spill = layout.merge_spill
    spill.parent.mkdir(parents=True, exist_ok=True)
    try:
        return _merge(layout, dataset, train, failed, memory_limit, spill, rules or ExportRules.defaults())
    finally:
        shutil.rmtree(spill, ignore_errors=True)


def _merge(layout: Layout, dataset: Path, train: Path, failed: Path, memory_limit: str, spill: Path,
           rules: ExportRules) -> dict:
    con = checkpoint.connect(layout, memory_limit=memory_limit)  # every shard's parts, as the checkpoint reads them
    con.execute(f"SET temp_directory = {db.quote(spill)}")
    if missing := db.query(con, "missing"):
        ids = ", ".join(r["prompt_id"] for r in missing[:20])
        raise AccountingError(f"{len(missing)} accepted prompt(s) are neither generated nor failed "
                              f"(rerun their shards): {ids}{' ...' if len(missing) > 20 else ''}")
    for path in (dataset, train, failed):
        path.parent.mkdir(parents=True, exist_ok=True)
    reasoning.define_macros(con, rules.reasoning_tags)
    con.execute(f"CREATE OR REPLACE TEMP VIEW merged_rows AS {db.prepared(con, 'dataset')}")
    _copy_dataset(con, dataset)
    con.execute(f"CREATE OR REPLACE VIEW dataset AS SELECT * FROM read_parquet({db.quote(dataset)})")
    text_exports = write_exports(con, layout, rules)
    # an export of the dataset as it was is gone; what the parts hold is recorded (after write_exports: its turns
    # view and winners), each trainer's export made on demand from it (shardgen export-hidden)
    hidden_exports.remove_exports(layout)
    hidden_states = hidden_exports.record(con, layout) if rules.hidden_states else None
    _copy(con, db.prepared(con, "export_train"), train, "json")  # over write_exports' text_turns
    _copy(con, db.prepared(con, "failed"), failed, "parquet")
    unbalanced = [r for r in db.query(con, "accounting") if not (r["read_balances"] and r["accepted_balances"]
                                                                     and r["turns_balance"])]
    if unbalanced:
        raise AccountingError(f"accounting does not balance for: {unbalanced}")
    rows = con.execute("SELECT count(*) FROM dataset").fetchall()[0][0]
    if rows != (turns := con.execute("SELECT coalesce(sum(generated_turns), 0) FROM outcomes").fetchall()[0][0]):
        raise AccountingError(f"the dataset has {rows} rows but {turns} turns were generated")
    return {"rows": rows, "text_exports": text_exports, "sharegpt": sharegpt_counts(con),
            "capture_turns": uncaptured.per_source(con), "hidden_states": hidden_states}
