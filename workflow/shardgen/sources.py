"""Read the rows of one configured source (JSONL, JSON, Parquet or an HF dataset), offline, never stopping on a bad row."""

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq

from shardgen import ShardgenError
from shardgen.formats import FORMAT_FIELDS, RowError


class SourceError(ShardgenError, ValueError):
    """A file- or config-level problem with a source: stops the run before any GPU work."""


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _jsonl_rows(path: Path) -> Iterator[tuple[int, object]]:
    with open(path, "rb") as f:
        for index, raw in enumerate(f):
            if not raw.strip():
                continue
            try:
                yield index, json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as err:
                yield index, RowError("unreadable", f"line {index + 1}: invalid UTF-8 at byte {err.start}")
            except json.JSONDecodeError as err:
                yield index, RowError("unreadable", f"line {index + 1}: malformed JSON ({err.msg} at column {err.colno})")


def _json_rows(path: Path) -> Iterator[tuple[int, object]]:
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SourceError(f"{path}: not a readable JSON file ({err})") from None
    if not isinstance(data, list):
        raise SourceError(f"{path}: a JSON source must hold a list of rows, found {type(data).__name__}")
    return enumerate(data)


def _check_columns(columns: list[str], source: dict, where: str) -> None:
    fields = source["fields"]
    needed = [fields.get(f, f) for f in FORMAT_FIELDS[source["format"]]]
    if missing := [c for c in needed if c not in columns]:
        raise SourceError(f"{where}: format {source['format']!r} needs column(s) {missing}; it has {columns}")


def _parquet_rows(path: Path, source: dict) -> Iterator[tuple[int, object]]:
    try:
        parquet = pq.ParquetFile(path)
    except Exception as err:  # pyarrow raises several types for a damaged file
        raise SourceError(f"{path}: not a readable Parquet file ({err})") from None
    _check_columns(parquet.schema_arrow.names, source, str(path))
    rows = (row for batch in parquet.iter_batches(batch_size=4096) for row in batch.to_pylist())
    return enumerate(rows)


def _hf_rows(source: dict) -> tuple[Iterator[tuple[int, object]], str]:
    import datasets

    name = source["dataset"]
    try:
        ds = datasets.load_dataset(name, source["config"], split=source["split"], revision=source["revision"],
                                   data_files=source["data_files"])
    except Exception as err:  # datasets raises many types; all mean "not loadable here"
        raise SourceError(f"source {source['name']!r}: cannot load HF dataset {name!r} offline "
                          f"(config={source['config']}, split={source['split']}): {type(err).__name__}: {err}") from None
    _check_columns(ds.column_names, source, f"source {source['name']!r} (dataset {name})")
    return enumerate(ds), source["revision"] or f"fingerprint:{ds._fingerprint}"


def _local_dataset(name: str) -> bool:
    """A dataset value that can only mean a folder: it exists, is written as a path, or has more than one slash
    (a hub id is `name` or `owner/name`)."""
    return Path(name).exists() or name.startswith(("/", ".")) or name.count("/") > 1


def check_readable(sources: list[dict]) -> None:
    """Raise SourceError naming every configured file or local dataset folder that cannot be read. The workflow
    calls this whenever it is parsed, so a wrong path stops every run, also one whose results exist. Hub dataset
    names are checked where prompts loads them (offline, at once)."""
    problems = []
    for source in sources:
        kind, value = ("file", source["path"]) if "path" in source else ("dataset folder", source["dataset"])
        if kind == "dataset folder" and not _local_dataset(value):
            continue
        path = Path(value)
        usable = path.is_file() if kind == "file" else path.is_dir()
        if not (usable and os.access(path, os.R_OK)):
            wanted = "a file" if kind == "file" else "a directory"
            state = "cannot be read" if usable else f"is not {wanted}" if path.exists() else "not found"
            problems.append(f"source {source['name']!r}: {kind} {value} {state} (resolved to {path.resolve()})")
    if problems:
        raise SourceError("; ".join(problems))


def open_source(source: dict) -> tuple[Iterator[tuple[int, object]], str, str]:
    """Return (rows as (source_row, row or RowError), origin, fingerprint); raise SourceError for file problems."""
    if "dataset" in source:
        rows, fingerprint = _hf_rows(source)
        origin = source["dataset"]
    else:
        path = Path(source["path"]).resolve()
        if not path.is_file():
            raise SourceError(f"source {source['name']!r}: file {source['path']} not found (resolved to {path})")
        readers = {".jsonl": _jsonl_rows, ".json": _json_rows,
                   ".parquet": lambda p: _parquet_rows(p, source)}
        if path.suffix not in readers:
            raise SourceError(f"source {source['name']!r}: {path.name}: unknown file type; use .jsonl, .json or .parquet")
        rows, origin, fingerprint = readers[path.suffix](path), str(path), f"sha256:{file_sha256(path)}"
    if source["limit"]:
        rows = (item for item, _ in zip(rows, range(source["limit"])))
    return rows, origin, fingerprint
