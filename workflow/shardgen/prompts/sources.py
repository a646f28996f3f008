"""Read one configured source (JSONL, JSON, Parquet or an HF dataset), offline, as chunks of rows that a worker
decodes; never stopping on a bad row. The main process only reads bytes or Arrow batches."""

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from shardgen import ShardgenError
from shardgen.config.sections import SourceConfig
from shardgen.prompts.formats import FORMATS, RowError

CHUNK_ROWS = 2048


class SourceError(ShardgenError, ValueError):
    """A file- or config-level problem with a source: stops the run before any GPU work."""


@dataclass
class Chunk:
    """Consecutive rows of one source: JSONL lines (raw bytes), parsed JSON rows, or an Arrow batch as IPC bytes
    (pickling a slice of a memory-mapped table would copy the whole table; IPC copies only the slice)."""

    source: int  # index in config.sources
    indices: list[int] | None = None  # source_row of each line or JSON row
    lines: list[bytes] | None = None
    values: list | None = None
    arrow: pa.Buffer | None = None
    start: int = 0  # source_row of the Arrow batch's first row
    size: int = 0  # rows in the Arrow batch

    @classmethod
    def of_batch(cls, source: int, batch: pa.RecordBatch, start: int) -> "Chunk":
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write(batch)
        return cls(source, arrow=sink.getvalue(), start=start, size=batch.num_rows)

    @property
    def _listed(self) -> list[int]:
        """source_row of each line or JSON row: a chunk that is no Arrow batch has them (of_batch makes the rest)."""
        assert self.indices is not None
        return self.indices

    def __len__(self) -> int:
        return self.size if self.arrow is not None else len(self._listed)

    @property
    def first_row(self) -> int:
        return self.start if self.arrow is not None else self._listed[0]

    @property
    def last_row(self) -> int:
        return self.start + self.size - 1 if self.arrow is not None else self._listed[-1]

    def _batch(self) -> pa.Table:
        return pa.ipc.open_stream(self.arrow).read_all()

    def rows(self) -> Iterator[tuple[int, object]]:
        """(source_row, row or RowError) for every row of the chunk."""
        if self.arrow is not None:
            return enumerate(self._batch().to_pylist(), self.start)
        if self.values is not None:
            return zip(self._listed, self.values)
        assert self.lines is not None  # neither an Arrow batch nor parsed rows: JSONL lines
        return zip(self._listed, map(_decode_line, self._listed, self.lines))

    def part(self, start: int, stop: int) -> "Chunk":
        if self.arrow is not None:
            return Chunk.of_batch(self.source, self._batch().slice(start, stop - start), self.start + start)
        cut = slice(start, stop)
        return Chunk(self.source, self._listed[cut], self.lines and self.lines[cut], self.values and self.values[cut])


def _decode_line(index: int, raw: bytes):
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        return RowError("unreadable", f"{_line(index)}: invalid UTF-8 at byte {err.start}")
    except json.JSONDecodeError as err:
        # some of json's messages end in "at" ("Unterminated string starting at")
        where = "" if err.msg.endswith(" at") else " at"
        return RowError("unreadable", f"{_line(index)}: malformed JSON ({err.msg}{where} column {err.colno})")


def _line(index: int) -> str:
    """The file's line as an editor counts it (from 1) beside source_row, the table's row number (from 0)."""
    return f"line {index + 1} (source_row {index})"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _jsonl_chunks(path: Path, source: int) -> Iterator[Chunk]:
    with open(path, "rb") as f:
        numbered = ((i, raw) for i, raw in enumerate(f) if raw.strip())
        while block := list(islice(numbered, CHUNK_ROWS)):
            yield Chunk(source, [i for i, _ in block], [raw for _, raw in block])


def _json_chunks(path: Path, source: int) -> Iterator[Chunk]:
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SourceError(f"{path}: not a readable JSON file ({err})") from None
    if not isinstance(data, list):
        raise SourceError(f"{path}: a JSON source must hold a list of rows, found {type(data).__name__}")
    return (Chunk(source, list(range(s, min(s + CHUNK_ROWS, len(data)))), values=data[s:s + CHUNK_ROWS])
            for s in range(0, len(data), CHUNK_ROWS))


def _check_columns(columns: list[str], source: SourceConfig, where: str) -> None:
    fields = source.fields
    needed = [fields.get(f, f) for f in FORMATS[source.format].fields]
    if missing := [c for c in needed if c not in columns]:
        raise SourceError(f"{where}: format {source.format!r} needs column(s) {missing}; it has {columns}")


def _batch_chunks(batches, source: int) -> Iterator[Chunk]:
    start = 0
    for batch in batches:
        yield Chunk.of_batch(source, batch, start)
        start += batch.num_rows


def _parquet_chunks(path: Path, source: SourceConfig, index: int) -> Iterator[Chunk]:
    try:
        parquet = pq.ParquetFile(path)
    except Exception as err:  # pyarrow raises several types for a damaged file
        raise SourceError(f"{path}: not a readable Parquet file ({err})") from None
    _check_columns(parquet.schema_arrow.names, source, str(path))
    return _batch_chunks(parquet.iter_batches(batch_size=CHUNK_ROWS), index)


def _hf_chunks(source: SourceConfig, index: int) -> tuple[Iterator[Chunk], str]:
    import datasets

    name = source.dataset
    try:
        ds = datasets.load_dataset(name, source.config, split=source.split, revision=source.revision,
                                   data_files=source.data_files)
    except Exception as err:  # datasets raises many types; all mean "not loadable here"
        raise SourceError(f"source {source.name!r}: cannot load HF dataset {name!r} offline "
                          f"(config={source.config}, split={source.split}): {type(err).__name__}: {err}") from None
    _check_columns(ds.column_names, source, f"source {source.name!r} (dataset {name})")
    # Arrow tables sliced from the memory-mapped cache: a 7M-row dataset is never one Python list.
    batches = ds.with_format("arrow").iter(batch_size=CHUNK_ROWS)
    return _batch_chunks(batches, index), source.revision or f"fingerprint:{ds._fingerprint}"


def _local_dataset(name: str) -> bool:
    """A dataset value that can only mean a folder: it exists, is written as a path, or has more than one slash
    (a hub id is `name` or `owner/name`)."""
    return Path(name).exists() or name.startswith(("/", ".")) or name.count("/") > 1


def check_readable(sources: list[SourceConfig]) -> None:
    """Raise SourceError naming every configured file or local dataset folder that cannot be read. The workflow
    calls this whenever it is parsed, so a wrong path stops every run, also one whose results exist. Hub dataset
    names are checked where prompts loads them (offline, at once)."""
    problems = []
    for source in sources:
        kind = "file" if source.path is not None else "dataset folder"
        value = source.path if source.path is not None else source.dataset
        assert value is not None  # exactly one of path and dataset is set (the schema's oneOf)
        if kind == "dataset folder" and not _local_dataset(value):
            continue
        path = Path(value)
        usable = path.is_file() if kind == "file" else path.is_dir()
        if not (usable and os.access(path, os.R_OK)):
            wanted = "a file" if kind == "file" else "a directory"
            state = "cannot be read" if usable else f"is not {wanted}" if path.exists() else "not found"
            problems.append(f"source {source.name!r}: {kind} {value} {state} (resolved to {path.resolve()})")
    if problems:
        raise SourceError("; ".join(problems))


def _limited(chunks: Iterator[Chunk], limit: int) -> Iterator[Chunk]:
    for chunk in chunks:
        if limit <= 0:
            return
        yield chunk.part(0, limit) if len(chunk) > limit else chunk
        limit -= len(chunk)


def open_source(source: SourceConfig, index: int = 0) -> tuple[Iterator[Chunk], str, str]:
    """Return (chunks of the source's rows, origin, fingerprint); raise SourceError for file problems. `index` is
    the source's place in the config, carried by its chunks."""
    if source.dataset is not None:
        chunks, fingerprint = _hf_chunks(source, index)
        origin = source.dataset
    else:
        assert source.path is not None  # no dataset: a path (the schema's oneOf)
        path = Path(source.path).resolve()
        if not path.is_file():
            raise SourceError(f"source {source.name!r}: file {source.path} not found (resolved to {path})")
        readers = {".jsonl": lambda p: _jsonl_chunks(p, index), ".json": lambda p: _json_chunks(p, index),
                   ".parquet": lambda p: _parquet_chunks(p, source, index)}
        if path.suffix not in readers:
            raise SourceError(f"source {source.name!r}: {path.name}: unknown file type; use .jsonl, .json or .parquet")
        chunks, origin, fingerprint = readers[path.suffix](path), str(path), f"sha256:{file_sha256(path)}"
    if source.limit:
        chunks = _limited(chunks, source.limit)
    return chunks, origin, fingerprint
