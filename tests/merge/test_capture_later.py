"""Capture turned on after a finished run: the turns committed before it have no sidecar row (a sidecar logprob is
the generating engine's; merge/uncaptured.py says why none is made up), and that is said in one line as the run
starts, by merge, in the exports manifest and in the report, never as a silent empty sidecar."""

import json
from types import SimpleNamespace

import pyarrow.parquet as pq

from shardgen.merge.stage import run as merge_step
from shardgen.report.summary import report
from shardgen.run_start import prepare_run

from helpers import stage

ROWS = [{"query": f"What is {i} plus {i + 1}?"} for i in range(4)]


def finish(config, layout):
    merge_step(config, layout.prompts, layout.prompt_table("sources"), layout.dataset, layout.train, layout.failed)
    return report(config, [layout.dataset, layout.train, layout.failed], [layout.done(0)], layout.report_dir)


def test_capture_turned_on_after_a_run_says_the_turns_it_lacks(make_config, write_jsonl, tmp_path, monkeypatch,
                                                                capsys):
    sources = [{"name": "q", "path": write_jsonl("q.jsonl", ROWS), "format": "query_response"},
               {"name": "r", "path": write_jsonl("r.jsonl", [{"query": "Name a colour."}]), "format": "query_response",
                "capture": False}]
    off = make_config(sources, shards=1)
    layout = stage(off, 1)
    summary = finish(off, layout)
    assert summary["capture_turns_not_captured"] == 0
    capsys.readouterr()

    on = make_config(sources, shards=1, capture={"logprobs": True, "top_k": 4})
    monkeypatch.chdir(tmp_path)  # Snakemake's state folder (the run guard) of this run
    prepare_run(SimpleNamespace(is_main_process=True), on)
    start = capsys.readouterr().err.strip().splitlines()
    assert len(start) == 1 and "capture is on, but 4 turns of captured sources were generated before it" in start[0]
    assert "per source: q: 4)" in start[0] and "shardgen reset" in start[0]  # r is not captured: not counted

    summary = finish(on, layout)
    assert "4 turns of captured sources were generated before it" in capsys.readouterr().err  # merge's log
    assert pq.read_table(layout.export("turns.topk.parquet")).num_rows == 0
    capture = json.loads(layout.exports_manifest.read_text())["capture"]
    assert capture["turns_per_source"] == {"q": {"turns": 4, "captured": 0}, "r": {"turns": 1, "captured": 0}}
    assert capture["turns_not_captured"] == {"q": 4}
    assert summary["capture_turns_not_captured"] == 4
    assert "Capture: capture is on, but 4 turns" in (layout.report_dir / "report.md").read_text()
