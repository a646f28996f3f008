"""Bad rows in every input format become rejected.parquet rows with a reason and the run goes on; file- and
config-level problems stop before any generation with one message naming the file, row or key."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shardgen.config import ConfigError
from shardgen.prompts.stage import build_prompts
from shardgen.prompts.sources import SourceError

GOOD = {"question": "What is the boiling point of water at sea level?", "answer": "100 degrees Celsius."}
# Rows every file format can hold (consistent column types), with the reason each must be rejected for.
BAD = [({"question": "", "answer": "x"}, "empty_prompt"),
       ({"question": "   \n\t", "answer": "x"}, "empty_prompt"),
       ({"question": None, "answer": "x"}, "missing_field"),
       ({"question": "bad\u0000byte", "answer": "x"}, "invalid_text"),
       ({"question": "long " * 600, "answer": "x"}, "too_long")]


def write(tmp_path, fmt: str, rows: list[dict]) -> dict:
    if fmt == "jsonl":
        path = tmp_path / "s.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return {"path": str(path)}
    if fmt == "json":
        path = tmp_path / "s.json"
        path.write_text(json.dumps(rows))
        return {"path": str(path)}
    folder = tmp_path / "hf" / "data"
    folder.mkdir(parents=True)
    path = (tmp_path / "s.parquet") if fmt == "parquet" else folder / "train-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    return {"path": str(path)} if fmt == "parquet" else {"dataset": str(tmp_path / "hf")}


@pytest.mark.parametrize("fmt", ["jsonl", "json", "parquet", "hf"])
def test_bad_rows_are_rejected_in_every_file_format(fmt, make_config, tmp_path):
    rows = [GOOD] + [row for row, _ in BAD] + [{**GOOD, "question": "Another good question?"}]
    source = {"name": "web", "format": "question_answer", **write(tmp_path, fmt, rows)}
    counts = build_prompts(make_config([source]), tmp_path / "prompts")
    rejected = pq.read_table(tmp_path / "prompts" / "rejected.parquet").to_pylist()
    assert [(r["source_row"], r["reason"]) for r in rejected] == [(i + 1, reason) for i, (_, reason) in enumerate(BAD)]
    assert all(r["detail"] for r in rejected)
    assert counts["web"] == {"read": 7, "rejected": 5, "duplicates": 0}
    assert pq.read_table(tmp_path / "prompts" / "prompts.parquet").num_rows == 2


def test_json_only_problems_in_jsonl(make_config, write_jsonl, tmp_path):
    path = write_jsonl("m.jsonl", [GOOD, '{"question": "unterminated', '[1, 2, 3]', '"a string"',
                                   {"question": ["a", "list"]}, {"conversations": "wrong format"}])
    with open(path, "ab") as f:
        f.write(b'{"question": "caf\xe9"}\n')  # latin-1 byte: invalid UTF-8
    counts = build_prompts(make_config([{"name": "m", "path": path, "format": "question_answer"}]),
                           tmp_path / "prompts")
    reasons = [r["reason"] for r in pq.read_table(tmp_path / "prompts" / "rejected.parquet").to_pylist()]
    assert reasons == ["unreadable", "not_object", "not_object", "wrong_type", "missing_field", "unreadable"]
    assert counts["m"]["read"] == 7


def test_file_level_problems_stop_before_any_row_is_processed(make_config, write_jsonl, tmp_path):
    good = {"name": "good", "path": write_jsonl("g.jsonl", [GOOD]), "format": "question_answer"}
    wrong_schema = tmp_path / "w.parquet"
    pq.write_table(pa.table({"text": ["x"]}), wrong_schema)
    for bad, message in [
        ({"name": "b", "path": str(wrong_schema), "format": "question_answer"},
         r"w.parquet: format 'question_answer' needs column"),
        ({"name": "b", "path": str(tmp_path / "nope.jsonl"), "format": "prompt"},
         r"source 'b': file .*nope.jsonl not found"),
    ]:
        with pytest.raises(SourceError, match=message):
            build_prompts(make_config([good, bad]), tmp_path / "prompts")
        assert not (tmp_path / "prompts" / "prompts.parquet").exists()
    with pytest.raises(ConfigError, match=r"sources\[0\].format"):
        make_config([{**good, "format": "alpaca"}])
