"""A generating shard's status row shows the ETA with the rate it divides by and the tokens it has left, and the
run's line names the same rate (issue 38, item 9: the row said 0.645 prompts/s and an ETA of 23 s with 50 prompts
left, and the run line another rate)."""

from datetime import datetime

from shardgen.generate.progress import Commit, RunProgress, ShardProgress
from shardgen.layout import Layout
from shardgen.report import eta
from shardgen.report.status import shard_status


def test_the_eta_is_the_tokens_left_over_the_rate_the_row_shows(monkeypatch, tmp_path):
    t0 = 1_800_000_000.0
    progress = ShardProgress()
    for k in range(4):  # 4 parts of 8 turns, 400 output tokens each, 10 s apart from t0 + 30
        progress.commits.append(Commit(1, t0 + 30 + 10 * k, 8, 400))
    progress.committed, progress.output_tokens = 32, 1600
    monkeypatch.setattr(eta, "run_progress", lambda layout: RunProgress({0: progress}, 0))
    monkeypatch.setattr(eta.attempt_log, "read_attempts", lambda shard_dir: [
        {"attempt": 1, "started_at": datetime.fromtimestamp(t0).astimezone().isoformat()}])
    monkeypatch.setattr(eta, "output_budget", lambda split: None)  # prompts left x the mean committed length
    row = {"shard": 0, "prompts": 100, "done": False, "state": "generating", "eta_s": None}

    run = eta.annotate(Layout(tmp_path), [row], now=t0 + 65)
    # The newer half of the commits: 800 tokens from t0 + 40 to t0 + 60, 40 tok/s. Left: 68 prompts x 50 tokens
    # = 3,400 tokens, at 40 tok/s 85 s after the newest commit (t0 + 60): 80 s from now. Prompts left over the
    # attempt's rows per second (32 / 65 s = 0.49) would have said 138 s.
    assert (row["tokens_left"], row["commit_tok_per_s"], row["eta_s"]) == (3400, 40.0, 80)
    assert row["eta_s"] == round(t0 + 60 + row["tokens_left"] / row["commit_tok_per_s"] - (t0 + 65))
    # The run: the same rate; its ETA never below all tokens left at that rate from now (3,400 / 40 = 85 s).
    assert run["output_tok_per_s"] == row["commit_tok_per_s"] and run["eta_s"] == 85
    assert "40.0 output tok/s committed" in eta.render(run) and "commit_tok_per_s" in eta.render(run)


def test_a_shard_row_no_longer_carries_a_rows_per_second_rate(make_config, write_jsonl):
    from helpers import stage
    from shardgen.generate.progress import run_progress

    layout = stage(make_config([{"name": "a", "path": write_jsonl("a.jsonl", [{"query": "Hi."}]),
                                 "format": "query_response"}]), 1)
    row = shard_status(layout, 0, run_progress(layout).shards[0], datetime.now().astimezone())
    assert "rate_per_s" not in row and {"tokens_left", "commit_tok_per_s", "eta_s", "out_tok_per_s"} <= set(row)
