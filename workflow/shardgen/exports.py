"""The conversation-level exports merge writes beside train.jsonl, one row per conversation, each in a format a
drafter trainer loads as it is (README: Exports names the loader each one matches). DuckDB streams each from the
dataset through the queries in workflow/sql/internal/ (conversations, export_*); nothing is held in Python."""

from pathlib import Path

from shardgen import db
from shardgen.atomic import committed
from shardgen.layout import Layout

# file name -> (query, format)
EXPORTS = {
    "sharegpt.jsonl": ("export_sharegpt", "json"),  # FastChat / SpecForge prepare_data: {id, system, conversations[{from, value}]}
    "messages.jsonl": ("export_messages", "json"),  # SpecForge train_data_path: {id, conversations[{role, content}]}
    "tokens.jsonl": ("export_tokens", "json"),  # SpecForge prompts_path, speculators prepare_data: {id, input_ids, loss_mask}
    "tokens.parquet": ("export_tokens", "parquet"),  # the same rows for datasets.load_dataset("parquet") / hf: paths
}
OPTIONS = {"json": "FORMAT json", "parquet": "FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 16384"}


def paths(layout: Layout) -> list[Path]:
    return [layout.export(name) for name in EXPORTS]


def write_exports(con, layout: Layout) -> list[Path]:
    """Every export, each committed atomically, from the `dataset` view of con (merge's freshly written one)."""
    db.turns_view(con)
    db.define_views(con, "conversations")
    layout.exports_dir.mkdir(parents=True, exist_ok=True)
    for name, (query, fmt) in EXPORTS.items():
        with committed(layout.export(name)) as tmp:
            con.execute(f"COPY ({db.sql(query)}) TO {db.quote(tmp)} ({OPTIONS[fmt]})")
    return paths(layout)
