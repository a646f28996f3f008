"""Bytes per token of each file merge writes: measured from a pilot run's own files when there is one, else
estimated from what each format stores, with the prompt set's own ids and text as the sample.

Measured (a pilot): a file's size less its fixed part (a Parquet file's footer and magic, which do not grow with
rows) over the tokens it holds (storage_loads.pilot_loads); a small pilot's per-row overheads (ids, keys, JSON
punctuation) are folded into that per-token figure, so the pilot should have the plan's turn and prompt lengths.

From the format (no pilot): token ids as int32 in Parquet/zstd cost what the prompt set's `prompt_ids` column
costs in prompts.parquet (same writer settings: zstd); in JSON lines a decimal id and its comma (the prompt ids'
mean digits + 1), plus "0," or "1," for its loss mask; text costs its UTF-8 bytes per token in the prompt set (JSON
lines), or its zstd bytes there (Parquet). The text exports are counted as if every conversation stopped (an upper
bound: those cut by length are left out of them, which only a pilot measures)."""

from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from shardgen.layout import Layout
from shardgen.merge.exports import EXPORTS

PARQUET_MAGIC = 8  # "PAR1" at the start, "PAR1" after the footer's 4-byte length
# The files' names, as Layout spells them (the plan's rows are named by file).
_NAMES = Layout(Path("."))
DATASET, TRAIN, MANIFEST = _NAMES.dataset.name, _NAMES.train.name, _NAMES.exports_manifest.name
MANIFEST_BYTES = 8 * 1024  # exports/manifest.json without a pilot: a few KiB of provenance, whatever the rows
SAMPLE_ROWS = 20_000  # prompt rows read for the id and text figures (enough for a mean; bounded memory)

# A file's rows: "turns" (one per generated turn) or "conversations" (one per conversation, its last turn holding
# the whole of it; the text exports carry a share of them, which a pilot measures).
DRIVERS = {DATASET: "turns", TRAIN: "conversations", "turns.jsonl": "turns",
           "turns.parquet": "turns", "tokens.jsonl": "conversations", "tokens.parquet": "conversations",
           "sharegpt.jsonl": "conversations", "messages.jsonl": "conversations", "reasoning.jsonl": "conversations"}
# The top-k sidecar is planned on its own (storage_plan: at k, over the captured sources' generated tokens): what it
# weighs depends on k and on what is captured, not on what the pilot captured.
SIDECAR = "turns.topk.parquet"
COUNT_CHUNK = 1 << 20  # bytes read at a time when counting a JSON-lines file's rows


def files(layout: Layout) -> dict[str, Path]:
    """Every file of the dataset and the exports but the top-k sidecar, by name."""
    return {DATASET: layout.dataset, TRAIN: layout.train, MANIFEST: layout.exports_manifest,
            **{name: layout.export(name) for name in EXPORTS if name != SIDECAR}}


def file_rows(path: Path) -> int | None:
    """A Parquet file's rows (its footer), a JSON-lines file's (its lines, streamed); None for another file."""
    if path.suffix == ".parquet":
        return pq.read_metadata(path).num_rows if path.stat().st_size else 0
    if path.suffix != ".jsonl":
        return None
    with open(path, "rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(COUNT_CHUNK), b""))


def on_disk(layout: Layout) -> dict[str, dict]:
    """Per file of a merged run: its rows and bytes as they are."""
    return {name: {"rows": file_rows(path), "bytes": path.stat().st_size}
            for name, path in files(layout).items() if path.is_file()}


def fixed_bytes(path: Path) -> int:
    """The part of a file that does not grow with its rows."""
    if path.suffix == ".parquet" and path.stat().st_size:
        return pq.read_metadata(path).serialized_size + PARQUET_MAGIC
    return path.stat().st_size if path.name == MANIFEST else 0


# Parquet columns whose bytes grow with a row's tokens (ids, masks, text); the others (keys, hashes, sampling
# values, the reference answer) grow with its rows.
TOKEN_COLUMNS = ("prompt_ids", "output_ids", "input_ids", "loss_mask", "messages", "completion", "content",
                 "reasoning_content", "conversations", "topk")


def column_split(path: Path) -> tuple[int, int]:
    """(bytes of the token columns, bytes of the row columns) of a Parquet file's column chunks."""
    meta, tokens, rows = pq.read_metadata(path), 0, 0
    for g in range(meta.num_row_groups):
        for i in range(meta.num_columns):
            chunk = meta.row_group(g).column(i)
            if chunk.path_in_schema.split(".")[0] in TOKEN_COLUMNS:
                tokens += chunk.total_compressed_size
            else:
                rows += chunk.total_compressed_size
    return tokens, rows


def measured(layout: Layout, loads) -> dict[str, dict]:
    """Per file of a finished run: its fixed bytes, bytes per row (a Parquet file's key and value columns) and
    bytes per token of the load it holds (the rest)."""
    rates = {}
    for name, path in files(layout).items():
        if not path.is_file():
            continue
        size, fixed = path.stat().st_size, fixed_bytes(path)
        driver = DRIVERS.get(name)
        tokens, rows = (loads.of(driver), loads.rows(driver)) if driver else (0, 0)
        per_row = column_split(path)[1] / rows if path.suffix == ".parquet" and size and rows else 0.0
        carried = file_rows(path)
        rates[name] = {"fixed_bytes": fixed, "bytes_per_row": per_row,
                       "bytes_per_token": (size - fixed - per_row * rows) / tokens if tokens else 0.0,
                       # the share of its driver's rows the file holds (the text exports carry fewer)
                       "row_share": carried / rows if rows and carried is not None else 1.0,
                       "from": "pilot run's file"}
    return rates


def prompt_sample_figures(prompts: Path) -> dict:
    """Bytes per token of ids and text, from the prompt set as prompts.parquet stores it."""
    meta = pq.read_metadata(prompts)
    columns = {meta.schema.column(i).path: i for i in range(meta.num_columns)}

    def compressed(prefix: str) -> int:
        return sum(meta.row_group(g).column(i).total_compressed_size for g in range(meta.num_row_groups)
                   for path, i in columns.items() if path.startswith(prefix))

    table = pq.ParquetFile(prompts).read_row_group(0, columns=["prompt_ids", "messages", "prompt_tokens"])
    table = table.slice(0, SAMPLE_ROWS)
    ids = pc.list_flatten(table["prompt_ids"])
    digits = pc.sum(pc.utf8_length(pc.cast(ids, "string"))).as_py() or 0
    text = pc.list_flatten(table["messages"]).flatten()[1]  # each message's content
    sample_tokens = max(len(ids), 1)
    all_tokens = max(pc.sum(pq.read_table(prompts, columns=["prompt_tokens"])["prompt_tokens"]).as_py() or 0, 1)
    return {"parquet_id": compressed("prompt_ids") / all_tokens, "parquet_text": compressed("messages") / all_tokens,
            "json_id": digits / sample_tokens + 1, "json_text": (pc.sum(pc.binary_length(text)).as_py() or 0)
            / sample_tokens}


def from_format(prompts: Path) -> dict[str, dict]:
    """Per file, with no pilot: bytes per token from what the format stores (the module's docstring)."""
    f = prompt_sample_figures(prompts)
    per_token = {
        # ids (prompt + output), the prompt's text and the answer's (completion, and content again beside reasoning)
        DATASET: f["parquet_id"] + 2 * f["parquet_text"],
        "turns.parquet": f["parquet_id"], "tokens.parquet": f["parquet_id"],  # loss masks: runs of 0 and 1, ~0 B
        "turns.jsonl": f["json_id"] + 2, "tokens.jsonl": f["json_id"] + 2,
        **{name: f["json_text"] for name in (TRAIN, "sharegpt.jsonl", "messages.jsonl", "reasoning.jsonl")},
    }
    rates = {name: {"fixed_bytes": 0, "bytes_per_token": rate, "from": "format estimate"}
             for name, rate in per_token.items()}
    rates[MANIFEST] = {"fixed_bytes": MANIFEST_BYTES, "bytes_per_token": 0.0, "from": "format estimate"}
    return rates


def planned_rows(rates: dict[str, dict], loads) -> dict[str, int | None]:
    """Each file's forecast rows: its driver's at the planned loads, times the share a pilot's file held."""
    return {name: round(loads.rows(DRIVERS[name]) * r.get("row_share", 1.0)) if name in DRIVERS else None
            for name, r in rates.items()}


def sizes(rates: dict[str, dict], loads) -> dict[str, int]:
    """Each file's forecast bytes at the planned loads."""
    def size(name: str, r: dict) -> int:
        driver = DRIVERS.get(name)
        tokens, rows = (loads.of(driver), loads.rows(driver)) if driver else (0, 0)
        return round(r["fixed_bytes"] + r.get("bytes_per_row", 0.0) * rows + r["bytes_per_token"] * tokens)

    return {name: size(name, r) for name, r in rates.items()}
