"""The conversation-level exports merge writes beside train.jsonl, one row per conversation, each in a format a
drafter trainer loads as it is (README: Exports names the loader each one matches). DuckDB streams each from the
dataset through the queries in workflow/sql/internal/ (conversations, export_*); nothing is held in Python."""

import json
from pathlib import Path

from shardgen import db
from shardgen.atomic import committed, write_text
from shardgen.layout import Layout

# file name -> (query, format)
EXPORTS = {
    "sharegpt.jsonl": ("export_sharegpt", "json"),  # FastChat / SpecForge prepare_data: {id, system, conversations[{from, value}]}
    "messages.jsonl": ("export_messages", "json"),  # SpecForge train_data_path: {id, conversations[{role, content}]}
    "tokens.jsonl": ("export_tokens", "json"),  # SpecForge prompts_path, speculators prepare_data: {id, input_ids, loss_mask}
    "tokens.parquet": ("export_tokens", "parquet"),  # the same rows for datasets.load_dataset("parquet") / hf: paths
}
MANIFEST = "manifest.json"  # the sidecar: what the rows were rendered with (not row fields: trainers read those)
LOSS_MASK = ("1 exactly on the last generated turn's output_ids (its end-of-turn token included); 0 on its "
             "prompt_ids, earlier regenerated answers included (re-rendered by the template there)")
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


def manifest(config, layout: Layout) -> dict:
    """The model's hashes (template included), each source's configured system prompt, chat template kwargs and
    multi-turn mode, and the files; a conversation's own system turn, where it had one, is in its rows."""
    from shardgen.target_model import ModelInfo

    model = ModelInfo.from_config(config.model)
    return {
        "model": {"path": str(model.path), **model.fingerprint},
        "sources": {s.name: {"system_prompt": s.system_prompt, "multi_turn": s.multi_turn,
                             "chat_template_kwargs": s.template_kwargs(config.defaults)} for s in config.sources},
        "files": [str(p) for p in paths(layout)],
        "loss_mask": LOSS_MASK,
        "note": "messages.jsonl carries each conversation's system turn exactly as regeneration rendered it; none "
                "means none was rendered (SpecForge then injects its template's default system prompt)",
    }


def write_manifest(config, layout: Layout) -> Path:
    write_text(json.dumps(manifest(config, layout), indent=1), layout.export(MANIFEST))
    return layout.export(MANIFEST)
