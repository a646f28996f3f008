"""The demo through the real `snakemake` CLI in a temp dir: end to end, a single-shard rerun, a SIGKILL of the
whole process group mid-generation followed by the same command, and the mistakes a new user makes on a finished
demo (a failed prompts job, a wrong source path, a deleted part, a dataset that cannot load)."""

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import duckdb
import pytest
import yaml

from shardgen.generate import checkpoint
from shardgen.layout import Layout
from shardgen.store import db

import preloaded
from conftest import BIN, REPO, copy_workflow, demo_snakemake as snakemake, load_yaml_files, wait_for
from helpers import check_identities, check_results

pytestmark = pytest.mark.slow


def finish(proc, timeout=300) -> str:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out[-4000:]
    return out


@pytest.fixture
def workdir(tmp_path, demo_model) -> Path:
    work = copy_workflow(tmp_path, demo_model)
    (work / "config" / "test.yaml").write_text("shards: 2\n")
    return work


def demo_sources(limit: int) -> list[dict]:
    """The demo's sources, each read up to `limit` rows: a fresh run whose point is not the demo's size generates a
    third of its prompts at 12."""
    return [{**source, "limit": limit} for source in yaml.safe_load((REPO / "config" / "demo.yaml").read_text())[
        "sources"]]


def test_demo_end_to_end_and_single_shard_rerun(finished_demo, finished):
    summary = check_results(finished_demo)
    assert summary["prompts_rejected"] > 0 and summary["prompts_duplicate"] > 0  # the demo shows both paths
    workdir = finished
    parts_before = {p: p.read_bytes() for p in workdir.glob("results/generate/shard-*/part-*.parquet")}
    out = finish(snakemake(workdir, "-R", "results/generate/shard-001.done.json"))
    assert "prompts, 0 to generate" in (workdir / "results/logs/generate/shard-001.log").read_text()
    assert "rule generate" in out and "rule report" in out
    assert {p: p.read_bytes() for p in workdir.glob("results/generate/shard-*/part-*.parquet")} == parts_before
    check_results(workdir)


def test_the_demos_empty_text_exports_are_said_on_the_console_and_in_the_report(finished_demo):
    # the demo's random model ends no turn with the end-of-turn token: every conversation is cut by max_new_tokens
    results = finished_demo / "results"
    assert [(results / name).stat().st_size for name in ("dataset/train.jsonl", "exports/sharegpt.jsonl",
                                                          "exports/messages.jsonl")] == [0, 0, 0]
    said = [line for line in (finished_demo / "demo-run.out").read_text().splitlines()
            if line.startswith("shardgen: the text exports ")]
    assert len(said) == 1 and " are empty: " in said[0] and "turns were cut by max_new_tokens" in said[0], said
    report = (results / "report" / "report.md").read_text()
    assert f"Text exports: {said[0].removeprefix('shardgen: ')}." in report


def test_sigkill_of_the_whole_run_then_the_same_command_completes(workdir):
    # Small commits (a part per 4 of a shard's ~30 prompts), so the kill lands after some parts and before the end;
    # outputs twice the demo's, so that a part takes several polls.
    (workdir / "config" / "test.yaml").write_text(yaml.safe_dump({
        "shards": 2, "checkpoint": {"every_records": 4, "every_seconds": 1}, "defaults": {"max_new_tokens": 48},
        "engine": {"max_running_requests": 4}, "sources": demo_sources(12)}))
    proc = snakemake(workdir, start_new_session=True)
    wait_for(proc, lambda: list(workdir.glob("results/generate/shard-*/part-00001.parquet")), "second part committed")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert list((workdir / ".snakemake" / "locks").glob("*.lock")), "expected the stale lock a SIGKILL leaves"
    committed = {p: p.read_bytes() for p in workdir.glob("results/generate/shard-*/part-*.parquet")}
    assert committed

    out = finish(snakemake(workdir))
    assert "stale Snakemake lock" in out
    for path, data in committed.items():
        assert path.read_bytes() == data, f"{path} changed after resume"
    summary = check_results(workdir)
    attempts = [json.loads((workdir / f"results/generate/shard-{s:03d}.done.json").read_text())["attempts"]
                for s in range(2)]
    assert max(len(a) for a in attempts) == 2  # the killed attempt, then the one that finished
    assert all(a[-1]["status"] == "finished" for a in attempts)
    assert summary["generated"] == summary["prompts_accepted"]


def test_shards_run_one_after_another_are_timed_on_the_runs_real_clock(finished_demo):
    # the demo ran with --cores 1 (conftest.finished_demo): one job at a time, shard 1 generated after shard 0
    workdir = finished_demo
    summary = json.loads((workdir / "results" / "report" / "summary.json").read_text())
    check_identities(summary)
    walls = [s["dataset_wall_s"] for s in summary["per_shard"]]
    # the union of the two shards' spans: their sum, not the longer one (which doubled the headline)
    assert summary["dataset_generation_wall_s"] == pytest.approx(sum(walls), abs=0.01), walls
    assert summary["parts_generation_wall_s"] == pytest.approx(sum(walls), abs=0.01)
    assert summary["dataset_shards_at_once"] == 1
    forecast = summary["forecast"]
    assert (forecast["gpus"], forecast["this_run_engines"]) == (2, 1)  # planned on 2, this run's time on 1
    report = (workdir / "results" / "report" / "report.md").read_text()
    assert "on the 1 CPU engine(s) that generated at once in it" in report


def test_a_run_whose_every_request_failed_reports_its_failures(workdir, monkeypatch):
    monkeypatch.setenv("SHARDGEN_FAULT", "engine_abort:user")  # every prompt's rendered text holds its user turn
    finish(snakemake(workdir))
    res = workdir / "results"
    summary = json.loads((res / "report" / "summary.json").read_text())
    assert (summary["generated"], summary["dataset_rows"], summary["forecast"]) == (0, 0, None)
    assert summary["failed"] == summary["prompts_accepted"] > 0
    report = (res / "report" / "report.md").read_text()
    assert f"Failed: {summary['failed']} of {summary['failed']} prompts" in report and "shardgen retry" in report
    assert "no rate to forecast from" in report


def test_a_full_disk_is_not_restarted_on_the_same_full_disk(workdir, monkeypatch):
    monkeypatch.setenv("SHARDGEN_FAULT", "enospc:2")  # a generate job's second part commit meets a full disk
    (workdir / "config" / "test.yaml").write_text(yaml.safe_dump({"shards": 2, "sources": demo_sources(12)}))
    out = fail(snakemake(workdir))
    res = workdir / "results"
    for shard in ("000", "001"):
        folder = res / "generate" / f"shard-{shard}"
        started = [line for line in (folder / "attempts.jsonl").read_text().splitlines() if '"event"' not in line]
        assert len(started) == 1, out[-3000:]  # Snakemake's retries refused at once: no engine started again
        assert not list(folder.glob(".*.tmp"))
        log = (res / "logs" / "generate" / f"shard-{shard}.log").read_text()
        assert "its last attempt stopped on a full disk" in log
    shown = subprocess.run([str(BIN / "shardgen"), "--results", str(res), "status"], capture_output=True, text=True,
                           timeout=300)
    rows = [dict(zip(shown.stdout.splitlines()[0].split(), line.split())) for line in shown.stdout.splitlines()[2:4]]
    assert [r["state"] for r in rows] == ["down:disk_full"] * 2, shown.stdout
    monkeypatch.delenv("SHARDGEN_FAULT")  # room again
    finish(snakemake(workdir))
    check_results(workdir)


def test_after_shardgen_retry_a_run_makes_only_merge_and_report_again(workdir, monkeypatch):
    monkeypatch.setenv("SHARDGEN_FAULT", "engine_abort:apples")  # the README's faulty run
    finish(snakemake(workdir))
    monkeypatch.delenv("SHARDGEN_FAULT")
    retried = preloaded.run(["--config", "config/demo.yaml", "retry"], cwd=workdir)
    assert retried.returncode == 0 and json.loads(retried.stdout)["retried_shards"], retried.stderr[-3000:]
    planned = finish(snakemake(workdir, "-n"))
    assert "rule generate" not in planned and "rule merge" in planned and "rule report" in planned, planned[-3000:]


@pytest.fixture
def finished(finished_demo, tmp_path) -> Path:
    """A copy of the finished demo (results and Snakemake's metadata, mtimes kept) to make mistakes in."""
    return Path(shutil.copytree(finished_demo, tmp_path / "work", symlinks=True))


def fail(proc, timeout=300) -> str:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode != 0, out[-4000:]
    return out


def max_lengths(work: Path) -> dict:
    return dict(duckdb.sql(f"SELECT source, max(completion_tokens) FROM '{work}/results/dataset/data.parquet' "
                           "GROUP BY 1").fetchall())


def test_a_failed_prompts_job_does_not_leave_a_stale_dataset(finished):
    (finished / "config" / "test.yaml").write_text("shards: 2\ndefaults: {max_new_tokens: 12}\n")
    # The HF folder is there (the parse-time check passes) but holds no data file: the prompts job fails. A dataset
    # folder is no input of prompts, so putting the file back changes nothing Snakemake watches.
    data = finished / "config" / "demo" / "alpaca_hf" / "data"
    (data / "train-00000-of-00001.parquet").rename(data / "aside")
    assert "cannot load HF dataset 'config/demo/alpaca_hf'" in fail(snakemake(finished))
    assert not (finished / "results" / "prompts" / "prompts.parquet").exists()  # Snakemake removed the outputs

    (data / "aside").rename(data / "train-00000-of-00001.parquet")
    out = finish(snakemake(finished))
    assert "rule prompts" in out and "rule merge" in out
    lengths = max_lengths(finished)
    assert lengths.pop("metamathqa") <= 32 and max(lengths.values()) <= 12  # what the config asks for now
    summary = check_results(finished)
    # metamathqa keeps its own max_new_tokens, so only the others' rows are new; the old ones are stale
    assert 0 < summary["stale_rows"] < summary["dataset_rows"]
    assert summary["parts_rows"] == summary["dataset_rows"] + summary["stale_rows"]


def test_a_wrong_source_path_fails_even_when_results_exist(finished):
    demo = finished / "config" / "demo.yaml"
    demo.write_text(demo.read_text().replace("config/demo/webinstruct.parquet", "config/demo/webinstrukt.parquet"))
    out = fail(snakemake(finished))
    assert "source 'webinstruct': file config/demo/webinstrukt.parquet not found" in out


def test_a_deleted_part_and_a_part_damaged_in_place_are_regenerated_by_a_plain_rerun(finished):
    deleted, damaged = (finished / "results" / "generate" / f"shard-{s}" / "part-00001.parquet" for s in ("000", "001"))
    lost = {part: duckdb.sql(f"SELECT count(*) FROM '{part}'").fetchall()[0][0] for part in (deleted, damaged)}
    deleted.unlink()
    stat = damaged.stat()
    with open(damaged, "r+b") as f:  # a partial copy back, its time kept (cp -p): the folder's time does not change
        f.truncate(stat.st_size // 2)
    os.utime(damaged, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    out = finish(snakemake(finished))
    assert "shard 1: part-00001.parquet changed since the shard's done file" in out
    assert "rule generate" in out and "rule merge" in out
    logs = [(finished / "results" / "logs" / "generate" / f"shard-{s}.log").read_text() for s in ("000", "001")]
    assert f"prompts, {lost[deleted]} to generate" in logs[0] and "part-00001.parquet is gone" in logs[0]
    assert f"prompts, {lost[damaged]} to generate" in logs[1]
    # each shard's job reads every shard's parts (earlier turns): whichever starts first moves the damaged one aside
    assert sum("shard-001/part-00001.parquet is unreadable (" in log for log in logs) == 1, logs
    assert check_results(finished)["generated"] == 135
    assert "Nothing to be done" in finish(snakemake(finished, "-n"))


def test_an_input_error_fails_once_at_once(finished):
    demo = finished / "config" / "demo.yaml"
    demo.write_text(demo.read_text().replace("dataset: config/demo/alpaca_hf", "dataset: nobody/no-such-dataset"))
    out = fail(snakemake(finished))
    assert out.count("Error in rule prompts") == 1 and "Trying to restart" not in out
    log = (finished / "results" / "logs" / "prompts.log").read_text()
    assert "cannot load HF dataset 'nobody/no-such-dataset'" in log and "Retrying in" not in log  # offline


def test_a_finished_demo_has_nothing_to_do_and_said_which_rows_it_lost(finished):
    out = finish(snakemake(finished, "-n"))
    assert "Nothing to be done" in out and "Set of input files has changed" not in out, out[-3000:]
    said = (finished / "demo-run.out").read_text()
    rejected = "results/prompts/rejected.parquet"
    lost = [line for line in said.splitlines() if line.startswith("prompts: source ")]
    assert lost and all(f"; each row, its reason and detail: {rejected}" in line for line in lost), said[-3000:]
    assert any(line.startswith("prompts: source metamathqa lost ") for line in lost)


def _status(work: Path, overlay: dict) -> list[str]:
    """`shardgen status` as the user runs it before the rerun, given the run's whole config: test.yaml = overlay."""
    (work / "config" / "test.yaml").write_text(yaml.safe_dump(overlay))
    whole = work / "config" / "whole.yaml"
    whole.write_text(yaml.safe_dump(load_yaml_files(*(work / "config" / name
                                                      for name in ("config.yaml", "demo.yaml", "test.yaml")))))
    shown = subprocess.run([str(BIN / "shardgen"), "--config", str(whole), "status"], cwd=work,
                           capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr[-3000:]
    return shown.stdout.splitlines()


def test_a_lower_context_length_ends_conversations_where_a_fresh_run_does(finished):
    # The demo's 8 two-turn conversations have turn 2 at 212-236 prompt tokens + 24 new: none fits 200, every turn 1
    # does (at most 80 + 32).
    lines = _status(finished, {"shards": 2, "model": {"context_length": 200}})
    rows = [dict(zip(lines[0].split(), line.split())) for line in lines[2:4]]
    assert "stale" in {r["state"] for r in rows}, lines  # work to do, before the rerun
    assert lines[-1].startswith("config: 8 conversations end elsewhere under model.context_length 200 (the prompt "
                                "set was built for 512; shard "), lines[-1]
    out = finish(snakemake(finished))
    assert "rule generate" in out and "rule merge" in out
    res = finished / "results"
    data = duckdb.sql(f"SELECT turn, count(*) FROM '{res}/dataset/data.parquet' GROUP BY 1").fetchall()
    assert data == [(1, 135)]  # every turn 2 left the dataset, as a fresh run at 200 never makes one
    log = (res / "logs" / "generate" / "shard-000.log").read_text() + (res / "logs/generate/shard-001.log").read_text()
    assert "end at a turn that no longer fits model.context_length 200" in log
    summary = json.loads((res / "report" / "summary.json").read_text())
    check_identities(summary)
    assert (summary["dataset_rows"], summary["stale_rows"], summary["generated"]) == (135, 8, 135)
    accounting = {r["source"]: r for r in db.query(checkpoint.connect(Layout(res)), "accounting")}
    assert accounting["infinity"]["context_exhausted"] == 8
    assert "Nothing to be done" in finish(snakemake(finished, "-n"))
    lines = _status(finished, {"shards": 2, "model": {"context_length": 200}})
    rows = [dict(zip(lines[0].split(), line.split())) for line in lines[2:4]]
    assert not lines[-1].startswith("config:") and [r["state"] for r in rows] == ["done"] * 2, lines


def test_after_a_new_split_status_and_the_report_list_its_shards(finished):
    (finished / "config" / "test.yaml").write_text("shards: 1\n")  # the demo ran on 2
    out = finish(snakemake(finished))
    assert "rule split" in out and "rule report" in out
    lines = _status(finished, {"shards": 1})
    rows = [dict(zip(lines[0].split(), line.split())) for line in lines[2:] if line.split()[0].isdigit()]
    assert [(r["shard"], r["prompts"], r["state"]) for r in rows] == [("0", "135", "done")], lines
    summary = json.loads((finished / "results" / "report" / "summary.json").read_text())
    # the folder of the earlier split's shard 1 made rows the dataset uses: listed, with no prompts of its own now
    assert [(s["shard"], s["prompts"]) for s in summary["per_shard"]] == [(0, 135), (1, None)]
    report = (finished / "results" / "report" / "report.md").read_text()
    assert "The split has 1 shard(s) (135 prompts); shard folder(s) 1 are of an earlier split" in report


def test_status_calls_a_sampling_change_stale_before_the_rerun(finished):
    raw = yaml.safe_load((finished / "config" / "demo.yaml").read_text())
    raw["sources"][1]["sampling"] = {"temperature": 0.9}  # webinstruct
    lines = _status(finished, {"shards": 2, "sources": raw["sources"]})
    rows = [dict(zip(lines[0].split(), line.split())) for line in lines[2:4]]
    assert [(r["state"], r["tokens_left"]) for r in rows] == [("stale", "-")] * 2, lines
    assert all(int(r["config_changed"]) > 0 for r in rows)  # webinstruct's prompts, in both shards
    assert not any("ETA 0 s" in line for line in lines) and lines[-1].startswith("config: ")
    planned = finish(snakemake(finished, "-n"))
    assert all(f"rule {rule}" in planned for rule in ("prompts", "split", "generate"))  # what status announced
