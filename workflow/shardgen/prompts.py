"""Stage 1: read every source, normalize to chat messages, tokenize once, dedupe, reject (never truncate)."""

from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from shardgen import tables
from shardgen.atomic import committed, write_table
from shardgen.config import Config
from shardgen.formats import RowError, conversation
from shardgen.keys import gen_key, prompt_id
from shardgen.model import ModelInfo
from shardgen.sources import open_source

BATCH = 2048


@dataclass
class SourceTally:
    rejected: list = field(default_factory=list)
    duplicates: list = field(default_factory=list)
    rows_read: int = 0
    system_replaced: int = 0


class PromptBuilder:
    """Turns normalized conversations into prompt rows, batch by batch, remembering which prompt_ids it kept."""

    def __init__(self, config: Config, model: ModelInfo, writer: pq.ParquetWriter):
        self.config, self.model, self.writer = config, model, writer
        self.kept: dict[bytes, str] = {}  # prompt_id digest -> source that keeps it
        self.pending: list[dict] = []

    def add(self, source: dict, source_row: int, conv, tally: SourceTally) -> None:
        pid = prompt_id(conv.messages)
        key = bytes.fromhex(pid)[:16]
        if key in self.kept:
            tally.duplicates.append({"source": source["name"], "source_row": source_row, "prompt_id": pid,
                                     "kept_source": self.kept[key]})
            return
        self.kept[key] = source["name"]
        self.pending.append({"source": source, "source_row": source_row, "conv": conv, "prompt_id": pid,
                             "tally": tally})
        if len(self.pending) >= BATCH:
            self.flush()

    def _encode_pending(self) -> list[list[int]]:
        # One batch per source: a source's template kwargs are the same for all its rows.
        ids: list = [None] * len(self.pending)
        by_source: dict[str, list[int]] = {}
        for i, item in enumerate(self.pending):
            by_source.setdefault(item["source"]["name"], []).append(i)
        for indices in by_source.values():
            source = self.pending[indices[0]]["source"]
            encoded = self.model.encode_batch([self.pending[i]["conv"].messages for i in indices],
                                              self.config.template_kwargs_for(source))
            for i, token_ids in zip(indices, encoded):
                ids[i] = token_ids
        return ids

    def flush(self) -> None:
        rows = []
        for item, ids in zip(self.pending, self._encode_pending()):
            source, conv = item["source"], item["conv"]
            sampling = self.config.sampling_for(source)
            if len(ids) + sampling["max_new_tokens"] > self.config["model"]["context_length"]:
                item["tally"].rejected.append({
                    "source": source["name"], "source_row": item["source_row"], "reason": "too_long",
                    "detail": f"{len(ids)} prompt tokens + max_new_tokens {sampling['max_new_tokens']} > "
                              f"context_length {self.config['model']['context_length']}"})
                continue
            rows.append({
                "prompt_id": item["prompt_id"],
                "gen_key": gen_key(item["prompt_id"], self.model.fingerprint, self.config.gen_settings(source)),
                "source": source["name"], "source_row": item["source_row"], "messages": conv.messages,
                "prompt_ids": ids, "prompt_tokens": len(ids), "max_new_tokens": sampling["max_new_tokens"],
                "temperature": sampling["temperature"], "top_p": sampling["top_p"], "top_k": sampling["top_k"],
                "sampling_extra": self.config.sampling_extra(source), "reference": conv.reference,
                "dropped_turns": conv.dropped_turns,
            })
        if rows:
            self.writer.write_table(pa.Table.from_pylist(rows, schema=tables.PROMPTS))
        self.pending = []


def build_prompts(config: Config, out_dir: Path) -> dict:
    """Write prompts/, rejected/, duplicates/ and sources.parquet under out_dir; return per-source counts."""
    model = ModelInfo.from_config(config["model"])
    model.stop_token_ids  # fails now, before any row is read, if the template is missing
    opened = [(source, *open_source(source)) for source in config["sources"]]  # file problems stop here
    tallies: dict[str, SourceTally] = {}
    source_rows = []
    with committed(out_dir / "prompts.parquet") as tmp:
        with pq.ParquetWriter(tmp, tables.PROMPTS, compression="zstd") as writer:
            builder = PromptBuilder(config, model, writer)
            for source, rows, origin, fingerprint in opened:
                tally = tallies[source["name"]] = SourceTally()
                for source_row, row in tqdm(rows, desc=f"prompts {source['name']}", unit="row", mininterval=5):
                    tally.rows_read += 1
                    try:
                        if isinstance(row, RowError):
                            raise row
                        conv, replaced = conversation(row, source["format"], source["fields"],
                                                      source["system_prompt"])
                    except RowError as err:
                        tally.rejected.append({"source": source["name"], "source_row": source_row,
                                               "reason": err.reason, "detail": err.detail})
                        continue
                    tally.system_replaced += replaced
                    builder.add(source, source_row, conv, tally)
                source_rows.append({"source": source["name"], "origin": origin, "fingerprint": fingerprint,
                                    "rows_read": tally.rows_read, "system_replaced": tally.system_replaced})
            builder.flush()
    write_table(pa.Table.from_pylist([r for t in tallies.values() for r in t.rejected], schema=tables.REJECTED),
                out_dir / "rejected.parquet")
    write_table(pa.Table.from_pylist([r for t in tallies.values() for r in t.duplicates], schema=tables.DUPLICATES),
                out_dir / "duplicates.parquet")
    write_table(pa.Table.from_pylist(source_rows, schema=tables.SOURCES), out_dir / "sources.parquet")
    return {name: {"read": t.rows_read, "rejected": len(t.rejected), "duplicates": len(t.duplicates)}
            for name, t in tallies.items()}
