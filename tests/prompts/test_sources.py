import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shardgen.config import Config
from shardgen.prompts.formats import RowError
from shardgen.prompts import sources
from shardgen.prompts.sources import SourceError, check_readable, open_source

from conftest import DEMO


def source(**kw):
    raw = {"model": {"path": "m"}, "sources": [{"name": "s", "format": "query_response", **kw}]}
    return Config.from_dict(raw).sources[0]


def rows_of(chunks):
    return [row for chunk in chunks for row in chunk.rows()]


def test_jsonl_rows_and_unreadable_lines(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"query": "q1"}\n\n{"query": "q2"\n{"query": "caf\xff"}\n[1, 2]\n')
    chunks, origin, fingerprint = open_source(source(path=str(path)))
    rows = rows_of(chunks)
    assert [i for i, _ in rows] == [0, 2, 3, 4]  # source_row is the line index; blank lines are not rows
    assert rows[0][1] == {"query": "q1"}
    assert isinstance(rows[1][1], RowError) and "line 3 (source_row 2): malformed JSON" in rows[1][1].detail
    assert isinstance(rows[2][1], RowError) and "invalid UTF-8" in rows[2][1].detail
    assert rows[3][1] == [1, 2]  # not an object: rejected later by the normalizer
    assert fingerprint.startswith("sha256:") and origin == str(path)


def test_a_json_message_ending_in_at_reads_once(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"query": "no end}')  # the last line, with no newline: the string never ends
    (_, row), = rows_of(open_source(source(path=str(path)))[0])
    assert row.detail == "line 1 (source_row 0): malformed JSON (Unterminated string starting at column 11)"


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".parquet"])
def test_chunks_and_limit_in_every_file_type(tmp_path, monkeypatch, suffix):
    monkeypatch.setattr(sources, "CHUNK_ROWS", 4)
    rows = [{"query": f"q{i}"} for i in range(10)]
    path = tmp_path / f"a{suffix}"
    if suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=4)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows) if suffix == ".jsonl" else json.dumps(rows))
    chunks = list(open_source(source(path=str(path)))[0])
    assert [len(c) for c in chunks] == [4, 4, 2] and [(c.first_row, c.last_row) for c in chunks][1] == (4, 7)
    assert rows_of(chunks) == list(enumerate(rows))
    limited = list(open_source(source(path=str(path), limit=6))[0])
    assert [len(c) for c in limited] == [4, 2] and rows_of(limited) == list(enumerate(rows[:6]))


def test_json_must_be_a_list(tmp_path):
    path = tmp_path / "a.json"
    path.write_text('{"query": "q"}')
    with pytest.raises(SourceError, match="must hold a list"):
        open_source(source(path=str(path)))


def test_parquet_with_the_wrong_schema_names_file_and_columns(tmp_path):
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"text": ["x"]}), path)
    with pytest.raises(SourceError, match=r"a.parquet: format 'query_response' needs column\(s\) \['query'\]"):
        open_source(source(path=str(path)))


def test_missing_file_and_unknown_suffix(tmp_path):
    with pytest.raises(SourceError, match="file nope.jsonl not found"):
        open_source(source(path="nope.jsonl"))
    (tmp_path / "a.csv").write_text("query\nx\n")
    with pytest.raises(SourceError, match="unknown file type"):
        open_source(source(path=str(tmp_path / "a.csv")))


def test_local_hf_dataset_folder_is_read_offline_in_arrow_chunks(monkeypatch):
    monkeypatch.setattr(sources, "CHUNK_ROWS", 8)
    chunks, origin, fingerprint = open_source(source(dataset=str(DEMO / "alpaca_hf"), limit=19, format="instruction"))
    chunks = list(chunks)
    assert [len(c) for c in chunks] == [8, 8, 3] and all(c.arrow is not None for c in chunks)  # never Python rows
    rows = rows_of(chunks)
    assert [i for i, _ in rows] == list(range(19)) and "instruction" in rows[0][1]
    assert fingerprint.startswith("fingerprint:")


def test_hub_dataset_that_cannot_load_offline():
    # huggingface_hub reads HF_HUB_OFFLINE at import: a fresh interpreter sees it
    code = ("from shardgen.prompts.sources import open_source, SourceError\n"
            "from shardgen.config.sections import SamplingOverrides, SourceConfig\n"
            f"try:\n    open_source({source(dataset='BAAI/Infinity-Instruct', config='7M')!r})\n"
            "except SourceError as err:\n    print(err)\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert "source 's': cannot load HF dataset 'BAAI/Infinity-Instruct' offline (config=7M, split=train)" in out


def test_every_unreadable_configured_source_is_named_with_its_path(tmp_path):
    good = tmp_path / "a.jsonl"
    good.write_text('{"query": "q"}\n')
    sources = [source(name="ok", path=str(good)), source(name="typo", path=str(tmp_path / "b.jsonl")),
               source(name="folder", path=str(tmp_path)), source(name="local", dataset=str(tmp_path / "gone_hf")),
               source(name="nested", dataset="config/demo/no_such_hf"), source(name="hub", dataset="org/name"),
               source(name="demo", dataset=str(DEMO / "alpaca_hf"))]
    with pytest.raises(SourceError) as err:
        check_readable(sources)
    assert str(err.value) == "; ".join([
        f"source 'typo': file {tmp_path / 'b.jsonl'} not found (resolved to {tmp_path / 'b.jsonl'})",
        f"source 'folder': file {tmp_path} is not a file (resolved to {tmp_path})",
        f"source 'local': dataset folder {tmp_path / 'gone_hf'} not found (resolved to {tmp_path / 'gone_hf'})",
        f"source 'nested': dataset folder config/demo/no_such_hf not found (resolved to "
        f"{(Path.cwd() / 'config/demo/no_such_hf')})",
    ])  # a hub id (org/name) is left to prompts, which loads it offline
    check_readable(sources[:1] + sources[-2:])
