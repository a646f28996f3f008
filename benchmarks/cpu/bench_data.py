"""Synthetic inputs for cpu_pipeline.py: a source file, a 131K-vocabulary tokenizer, prompts.parquet and parts at
any scale, written in blocks so that making them never holds the whole set in memory."""

import hashlib
import json
import random
import shutil
import sys
import sysconfig
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from shardgen.store import tables
from shardgen.layout import Layout, part_path, prompt_table

WORDS = (Path(__file__).resolve().parents[2] / "config" / "demo" / "corpus.txt").read_text().split()
BLOCK = 100_000


def write_source(path: Path, rows: int) -> Path:
    """MetaMathQA-style rows of 10-60 words, about 2% of them exact copies of an earlier one."""
    rnd = random.Random(0)
    with open(path, "w") as f:
        for i in range(rows):
            n = rnd.randrange(i) if i and rnd.random() < 0.02 else i
            words = " ".join(random.Random(n).choices(WORDS, k=random.Random(-n).randint(10, 60)))
            f.write(json.dumps({"query": f"{n}: {words}?", "response": "ok"}) + "\n")
    return path


def _local_text(limit_bytes: int):
    """Python sources of the standard library and the installed packages: the local text there is most of."""
    roots = [Path(sysconfig.get_paths()["stdlib"]), Path(sysconfig.get_paths()["purelib"])]
    seen = 0
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            try:
                text = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            yield text
            seen += len(text)
            if seen >= limit_bytes:
                return


def train_bpe(out: Path, demo_model: Path, vocab_size: int, text_bytes: int = 150_000_000) -> Path:
    """A byte-level BPE of the Qwen/Nemotron kind (GPT-4-style split regex), trained here: a copy of the demo
    model folder with this tokenizer (only the tokenizer is used by prompts)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    if (out / "tokenizer.json").exists():
        return out
    shutil.copytree(demo_model, out, dirs_exist_ok=True)
    split = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
             r"|\s+(?!\S)|\s+")
    tokenizer = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(split), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    special = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(_local_text(text_bytes), trainer)
    tokenizer.save(str(out / "tokenizer.json"))
    print(f"trained a BPE of {tokenizer.get_vocab_size()} tokens", file=sys.stderr)
    return out


def _hex_ids(prefix: str, start: int, n: int) -> pa.Array:
    return pa.array([hashlib.sha256(f"{prefix}{i}".encode()).hexdigest() for i in range(start, start + n)])


def _lists(lengths: np.ndarray, values: pa.Array) -> pa.ListArray:
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), values)


def synthesize_prompts(prompts_dir: Path, rows: int, sources: int = 4) -> None:
    """prompts.parquet in the contract's schema (one user turn of 10-60 words, 20-150 prompt ids, 512 new
    tokens), with matching sources.parquet and empty rejected/duplicates, as the prompts stage writes them."""
    rng = np.random.default_rng(0)
    prompts_dir.mkdir(parents=True, exist_ok=True)
    words = np.array(WORDS)
    with pq.ParquetWriter(prompt_table(prompts_dir, "prompts"), tables.PROMPTS, compression="zstd") as writer:
        for start in range(0, rows, BLOCK):
            n = min(BLOCK, rows - start)
            counts = rng.integers(10, 61, size=n)
            picks = words[rng.integers(0, len(words), size=int(counts.sum()))]
            cuts = np.cumsum(counts)[:-1]
            content = pa.array([" ".join(w) + "?" for w in np.split(picks, cuts)])
            turn = pa.StructArray.from_arrays([pa.array(["user"] * n), content], names=["role", "content"])
            lengths = rng.integers(20, 151, size=n)
            ids = _lists(lengths, pa.array(rng.integers(5, 2048, size=int(lengths.sum()), dtype=np.int32)))
            source = pa.array([f"s{(start + i) % sources}" for i in range(n)])
            writer.write_table(pa.table({
                "prompt_id": _hex_ids("p", start, n), "gen_key": _hex_ids("g", start, n), "source": source,
                "source_row": pa.array(np.arange(start, start + n)), "messages": _lists(np.ones(n, int), turn),
                "prompt_ids": ids, "prompt_tokens": pa.array(lengths.astype(np.int32)),
                "max_new_tokens": pa.array(np.full(n, 512, np.int32)), "temperature": pa.array(np.full(n, 0.7)),
                "top_p": pa.array(np.full(n, 0.95)), "top_k": pa.array(np.full(n, -1, np.int32)),
                "sampling_extra": pa.array(["{}"] * n), "reference": pa.array(["ok"] * n),
                "dropped_turns": pa.array(np.zeros(n, np.int32))}, schema=tables.PROMPTS))
    pq.write_table(tables.REJECTED.empty_table(), prompt_table(prompts_dir, "rejected"))
    pq.write_table(tables.DUPLICATES.empty_table(), prompt_table(prompts_dir, "duplicates"))
    per_source = [len(range(s, rows, sources)) for s in range(sources)]
    pq.write_table(pa.Table.from_pylist([
        {"source": f"s{s}", "origin": "synthetic", "fingerprint": "synthetic", "rows_read": per_source[s],
         "system_replaced": 0} for s in range(sources)], schema=tables.SOURCES), prompt_table(prompts_dir, "sources"))


def synthesize_parts(layout: Layout, shards: int, out_tokens: int, per_part: int = 2000) -> int:
    """One committed, finished row per prompt of every shard, ~out_tokens output ids each (uniform x0.5-x1.5)."""
    rng = np.random.default_rng(0)
    t0 = datetime.now(timezone.utc)
    written = 0
    for shard in range(shards):
        parquet = pq.ParquetFile(layout.split(shard))
        part = 0
        for batch in parquet.iter_batches(batch_size=per_part, columns=["prompt_id", "gen_key", "prompt_tokens"]):
            n = batch.num_rows
            lengths = rng.integers(out_tokens // 2, out_tokens * 3 // 2, size=n)
            ids = _lists(lengths, pa.array(rng.integers(5, 2048, size=int(lengths.sum()), dtype=np.int32)))
            finished = [t0 + timedelta(milliseconds=int(x)) for x in rng.integers(0, 3_600_000, size=n)]
            table = pa.table({
                "prompt_id": batch["prompt_id"], "gen_key": batch["gen_key"],
                "shard": pa.array([shard] * n, pa.int32()),
                "attempt": pa.array([1] * n, pa.int32()), "completion": pa.array(["x " * 40] * n),
                "output_ids": ids, "finish_reason": pa.array(["length"] * n), "prompt_tokens": batch["prompt_tokens"],
                "completion_tokens": pa.array(lengths, pa.int32()), "cached_tokens": pa.array([0] * n, pa.int32()),
                "latency_s": pa.array(rng.random(n) * 60), "submitted_at": pa.array([t0] * n, tables.UTC),
                "finished_at": pa.array(finished, tables.UTC), "gpu": pa.array([str(shard)] * n),
                "error": pa.array([None] * n, pa.string())}, schema=tables.PART)
            path = part_path(layout.shard_dir(shard), part)
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, path, compression="zstd")
            part += 1
            written += n
    return written
