"""The exports merge writes beside train.jsonl, each in a format a drafter trainer loads as it is (docs/trainers.md
names the loader each one matches, the settings to use and what each trains that the model did not generate).
DuckDB streams each from the dataset through the queries in workflow/sql/internal/ (text_turns, conversations,
split_conversations, export_*); nothing is held in Python.

Token exports (turns.*, tokens.*) hold the ids the model generated, every turn as generated; the .jsonl files are
the trainers' (both read JSON lines only), the .parquet files the same rows for DuckDB and `datasets`. Text exports
(sharegpt.jsonl, messages.jsonl, reasoning.jsonl and dataset/train.jsonl) are re-rendered by their loaders, which end
every assistant turn with the template's end-of-turn token: they carry a conversation only up to its last turn that
ended with that token (exports.on_length: a cut, or a stop on another stop token, would be trained as one), and
messages/reasoning carry each answer's reasoning apart (model.reasoning_tags)."""

import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from shardgen.store import db, tables
from shardgen.capture import MAX_TOP_K, Capture, HiddenCapture
from shardgen.store.atomic import committed, write_text
from shardgen.layout import Layout
from shardgen.merge import hidden_exports, reasoning, uncaptured

# file name -> (query, format)
EXPORTS = {
    "turns.jsonl": ("export_turns", "json"),  # SpecForge prompts_path, speculators prepare_data: a row per turn
    # the same rows for DuckDB, datasets.load_dataset("parquet"); no trainer
    "turns.parquet": ("export_turns", "parquet"),
    "tokens.jsonl": ("export_tokens", "json"),  # the same loaders: {id, input_ids, loss_mask}, a row per conversation
    "tokens.parquet": ("export_tokens", "parquet"),  # the same rows for DuckDB and datasets; no trainer
    "sharegpt.jsonl": ("export_sharegpt", "json"),  # FastChat: {id, system, conversations[{from, value}]}
    # SpecForge train_data_path: {id, conversations[{role, content, reasoning_content}]}
    "messages.jsonl": ("export_messages", "json"),
    # SpecForge expand_reasoning_conversations.py: {id, status, conversations}
    "reasoning.jsonl": ("export_reasoning", "json"),
    # the capture sidecar (config `capture`): turns.jsonl's ids, an entry per loss-masked position; always written,
    # with no rows when nothing was captured, so the merge's outputs are the same set either way
    "turns.topk.parquet": ("export_topk", "sidecar"),
}
LOSS_MASK = {
    "turns": "1 exactly on the turn's output_ids (its end-of-turn token included when it stopped); 0 on its "
             "prompt_ids: every generated token of the dataset is 1 in exactly one row",
    "tokens": "1 exactly on the last generated turn's output_ids; 0 on its prompt_ids, earlier regenerated answers "
              "included (re-rendered by the template there)",
}
SHAREGPT_EMPTY = ("FastChat's rows (the ShareGPT export and the dataset's train file) end a conversation before its "
                  "first empty answer (the model emitted only its end-of-turn token), leaving it out where that is "
                  "its first answer: FastChat trains an answer's text without its end of turn, so an empty answer "
                  "trains nothing, and its masking then slips onto the next user turn")
OPTIONS = {"json": "FORMAT json", "parquet": "FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 16384"}
SIDECAR_BATCH = 4096  # rows per record batch streamed from DuckDB into the sidecar's writer


@dataclass(frozen=True)
class ExportRules:
    """The settings the exports depend on: model.reasoning_tags, exports.on_length, the template's end-of-turn id
    (None: every stop counts as one) and whether hidden states are captured (merge records what the parts hold)."""
    reasoning_tags: list[str] | None
    on_length: str
    end_of_turn_id: int | None = None
    hidden_states: bool = False

    @classmethod
    def of(cls, config) -> "ExportRules":
        from shardgen.capture import HiddenCapture

        return cls(config.model.reasoning_tags, config.exports.on_length, config.target_model.end_of_turn_id,
                   HiddenCapture.of(config) is not None)

    @classmethod
    def defaults(cls) -> "ExportRules":
        """The schema's defaults, for a merge run without a config (tests, benchmarks)."""
        from shardgen.config.schema import schema

        properties = schema()["properties"]
        return cls(properties["model"]["properties"]["reasoning_tags"]["default"],
                   properties["exports"]["properties"]["on_length"]["default"])


def paths(layout: Layout) -> list[Path]:
    return [layout.export(name) for name in EXPORTS]


def define_views(con, rules: ExportRules) -> None:
    """On con, whose `dataset` view is merge's freshly written dataset: the reasoning macros, the export rule and
    the turns view; the text exports' own views follow from their queries' `-- requires:`."""
    reasoning.define_macros(con, rules.reasoning_tags)
    con.execute("CREATE OR REPLACE TEMP TABLE export_rule AS SELECT $on_length AS on_length, "
                "CAST($end_of_turn_id AS BIGINT) AS end_of_turn_id",
                {"on_length": rules.on_length, "end_of_turn_id": rules.end_of_turn_id})
    db.turns_view(con)


def write_exports(con, layout: Layout, rules: ExportRules | None = None) -> dict:
    """Every export, each committed atomically; returns what the text exports left out and the reasoning counts
    (the manifest's `text_exports`)."""
    rules = rules or ExportRules.defaults()
    define_views(con, rules)
    layout.exports_dir.mkdir(parents=True, exist_ok=True)
    for name, (query, fmt) in EXPORTS.items():
        with committed(layout.export(name)) as tmp:
            if fmt == "sidecar":
                write_sidecar(con, db.prepared(con, query), tmp)
            else:
                con.execute(f"COPY ({db.prepared(con, query)}) TO {db.quote(tmp)} ({OPTIONS[fmt]})")
    counts = db.query(con, "export_counts")[0]
    counts["reasoning_rows"] = con.execute(
        f"SELECT count(*) FROM ({db.prepared(con, 'export_reasoning')})").fetchall()[0][0]
    return {"on_length": rules.on_length, "reasoning_tags": rules.reasoning_tags, **counts}


TEXT_EXPORTS = ("sharegpt.jsonl", "messages.jsonl")  # beside the dataset's train file: FastChat's, SpecForge's
TOKEN_EXPORTS = ("turns.jsonl", "tokens.jsonl")


def text_exports_note(layout: Layout, counts: dict) -> str | None:
    """One line where the text exports leave conversations out (`counts`: the manifest's `text_exports`): how many
    they carry and why; None where they carry every conversation."""
    left_out, conversations = counts["text_conversations_left_out"], counts["conversations"]
    if not left_out:
        return None
    carried = "are empty" if left_out == conversations else f"carry {conversations - left_out} of {conversations} " \
                                                                 "conversations"
    text = ", ".join(str(path) for path in [layout.train, *map(layout.export, TEXT_EXPORTS)])
    tokens = ", ".join(str(layout.export(name)) for name in TOKEN_EXPORTS)
    return (f"the text exports ({text}) {carried}: they carry a conversation only up to its last turn that ended "
            f"with the template's end-of-turn token (exports.on_length: {counts['on_length']}), and "
            f"{counts['turns_cut_by_length']} of {counts['turns']} turns were cut by max_new_tokens "
            f"({counts['turns_stopped_on_other_token']} stopped on another token); a larger max_new_tokens cuts "
            f"fewer; the token exports ({tokens}) keep every turn as generated")


def sharegpt_counts(con) -> dict:
    """What FastChat's rows leave out of the text conversations at an empty answer, and why (the manifest's
    `sharegpt`); after write_exports, on its connection."""
    return {**db.query(con, "sharegpt_counts")[0], "reason": SHAREGPT_EMPTY}


def write_sidecar(con, query: str, path: Path) -> None:
    """The capture sidecar in its compact layout (tables.TOPK_SIDECAR: float16 logprobs, which DuckDB cannot
    write): the query's rows streamed in record batches, each cast and appended, so memory holds one batch."""
    schema = tables.TOPK_SIDECAR
    reader = con.sql(query).to_arrow_reader(SIDECAR_BATCH)
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        for batch in reader:
            writer.write_table(pa.Table.from_batches([batch]).cast(schema))


def capture_manifest(config, layout: Layout, turns: dict[str, dict]) -> dict:
    """The manifest's description of the capture sidecar: its settings, rows and layout, and per source its turns
    and those generated with capture (`turns`: merge/uncaptured.per_source)."""
    path = layout.export("turns.topk.parquet")
    rows = pq.ParquetFile(path).metadata.num_rows if path.is_file() else 0
    section, capture = getattr(config, "capture", None), Capture.of(config)
    captured = ("none" if capture is None or not capture.captures_any else "all" if capture.sources is None
                else sorted(capture.sources))
    return {
        "logprobs": bool(section and section.logprobs), "top_k": section.top_k if section else None,
        "signal": bool(section and section.signal), "sources": captured, "max_top_k": MAX_TOP_K, "file": str(path),
        "rows": rows,
        "rows_are": "one per turns.jsonl row (same id) whose turn was generated with capture on; none for a turn "
                    "generated without it (capture off, or committed before it was turned on)",
        "turns_per_source": turns,
        "turns_not_captured": uncaptured.missing(config, turns),
        "positions": "one entry per loss-masked position of the turns.jsonl row (its output_ids), in order",
        "columns": {"id": "turns.jsonl's id (conversation_id#turn)",
                    "logprobs": "float16 per position: the chosen token's logprob",
                    "top_ids": "int32 k per position: the k most likely tokens, most likely first",
                    "top_logprobs": "float16 k per position: their logprobs"},
        "logprob": "log_softmax(logits / temperature) over the whole vocabulary, after logit penalties and before "
                   "top-k/top-p/min-p truncation (greedy: temperature 1); SGLang's default, and the CPU engine's",
        "padding": "a position the engine gave no logprob for (a stop token left out of its logprobs): NaN, ids -1",
    }


def hidden_manifest(config, layout: Layout, merged: dict | None) -> dict | None:
    """The hidden states (merge/hidden_exports.py): the settings, the layers and dtype as committed, the model they
    were computed with, the dataset's turns that have them and the parts' bytes, and per trainer the commands that
    make and train on its export, or why it cannot be made; None when capture is off."""
    hidden = HiddenCapture.of(config)
    if hidden is None or merged is None:
        return None
    header = merged["header"] or {}
    return {"layer_set": hidden.layers, "layers": header.get("layers"), "num_layers": header.get("num_layers"),
            "dtype": header.get("dtype"),
            "scale": "float8_e4m3fn: one float32 per position, amax over its layers / 448; the value is fp8 * scale"
                     if hidden.dtype == "float8_e4m3fn" else None,
            "sources": "all" if hidden.sources is None else sorted(hidden.sources),
            "model_hash": config.target_model.fingerprint["model"],
            "layer_ids_are": "output_hidden_states indices: 0 the embeddings, i the input of decoder layer i, L the "
                             "last after the final norm; last_before_norm: the final norm's input",
            **{key: merged[key] for key in ("turns", "turns_captured", "turns_without_states", "parts")},
            "stored_in": "the parts' states files (one beside each part, committed with it), the one copy; a "
                         "trainer's export is written on demand by its `make` command (docs/trainers.md)",
            **hidden_exports.exportable(config, layout, merged)}


def manifest(config, layout: Layout, merged: dict) -> dict:
    """What determined the rows (shardgen.merge.provenance: model and template hashes, engine and numerics per
    shard, sampling per source), each source's configured system prompt, chat template kwargs and multi-turn mode,
    the files, the loss-mask rules, and from merge's record (`merged`) what the text exports and FastChat's rows left
    out and the captured turns per source."""
    from shardgen.merge.provenance import provenance

    return {
        **provenance(config, layout),
        "sources": {s.name: {"system_prompt": s.system_prompt, "multi_turn": s.multi_turn,
                             "chat_template_kwargs": s.template_kwargs(config.defaults)} for s in config.sources},
        "files": [str(p) for p in paths(layout)],
        "loss_mask": LOSS_MASK,
        "text_exports": merged["text_exports"],
        "sharegpt": merged["sharegpt"],
        "capture": capture_manifest(config, layout, merged["capture_turns"]),
        "hidden_states": hidden_manifest(config, layout, merged.get("hidden_states")),
        "note": "messages.jsonl carries each conversation's system turn exactly as regeneration rendered it; none "
                "means none was rendered (SpecForge then injects its template's default system prompt)",
    }


def write_manifest(config, layout: Layout, merged: dict) -> Path:
    """merged: merge's record (merge/dataset.py): its counts of what the text exports left out (turns cut by length
    and what followed), of what FastChat's rows left out, and its turns and captured turns per source."""
    write_text(json.dumps(manifest(config, layout, merged), indent=1, default=str), layout.exports_manifest)
    return layout.exports_manifest
