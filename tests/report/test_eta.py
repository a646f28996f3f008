"""The status ETA on a real CPU run: once 10% of the output tokens are committed, the finish time it predicts is
within 10% of the run's actual duration (engine start-up included)."""

import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from shardgen.report import eta
from shardgen.generate.attempts import read_attempts
from shardgen.layout import Layout
from shardgen.generate.checkpoint import part_files
from shardgen.generate.progress import Commit, ShardProgress
from shardgen.prompts.stage import build_prompts
from shardgen.prompts.split import split
from shardgen.report.status import status


@pytest.mark.slow
@pytest.mark.alone  # its measure is wall time: another test beside it would change the run's speed mid-way
def test_eta_at_ten_percent_is_within_ten_percent_of_the_duration(make_config, write_jsonl):
    # prompts of one length (four-digit numbers): the split's heaviest-first order would otherwise make the early
    # rate slower than the late one, on a CPU where speed depends on prompt length. A part per batch of 8 (the
    # CPU engine's batch), never by time: commits a second apart split each batch unevenly, and the rate, measured
    # from commit to commit over a window of a few batches, put the ETA 18.7% long on a fast CI machine. 64 new
    # tokens: at 10% that window spans several batches there too.
    path = write_jsonl("a.jsonl", [{"query": f"Count from {i} to {i + 40}, one number a line."}
                                   for i in range(1000, 2200)])
    config = make_config([{"name": "a", "path": path, "format": "query_response"}], shards=1,
                         checkpoint={"every_records": 8, "every_seconds": 3600}, defaults={"max_new_tokens": 64})
    layout = Layout(config.results)
    build_prompts(config, layout.prompts_dir)
    split(layout.prompts, layout.split_dir, 1)
    # one torch thread: the run keeps one core to itself and this poller takes the other (2-core CI machines)
    env = {**os.environ, "PYTHONPATH": str(Path(eta.__file__).parents[2]), "OMP_NUM_THREADS": "1"}
    job = subprocess.Popen([sys.executable, "-m", "shardgen.cli", "--config", str(config.write_resolved()),
                            "generate", "--shard", "0", "--done", str(layout.done(0))], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    polls = []
    while job.poll() is None:
        now = time.time()
        run = eta.annotate(layout, status(layout), now)
        polls.append((now, run["output_tokens_committed"], run["eta_s"]))
        time.sleep(1.0)  # status polled faster takes CPU from the run it measures (2 cores)
    assert job.returncode == 0, job.stderr.read()[-2000:]

    total = eta.annotate(layout, status(layout))["output_tokens_committed"]
    started = datetime.fromisoformat(read_attempts(layout.shard_dir(0))[0]["started_at"]).timestamp()
    finished = max(p.stat().st_mtime for p in part_files(layout.shard_dir(0)))
    at, committed, eta_s = next(p for p in polls if p[1] >= 0.1 * total)
    duration, predicted = finished - started, at + eta_s
    print(f"ETA at {committed / total:.1%} of {total} tokens, {at - started:.1f} s in: predicted finish "
          f"{predicted - started:.1f} s, actual {duration:.1f} s ({(predicted - finished) / duration:+.1%})")
    assert committed < 0.5 * total  # caught early, not at the end
    assert abs(predicted - finished) <= 0.1 * duration, (predicted - finished, duration, committed, total)


def _commit(progress, attempt, tokens, at, budget=None):
    """A part of 8 turns and `tokens` output tokens of `attempt`, committed at epoch second `at` (using `budget`
    output tokens of the turns' limits, if given)."""
    progress.commits.append(Commit(attempt, at, 8, tokens))
    progress.committed += 8
    progress.output_tokens += tokens
    progress.budget_spent += budget or 0


def _attempts(t0, *offsets):
    return [{"attempt": k, "started_at": datetime.fromtimestamp(t0 + offset).astimezone().isoformat()}
            for k, offset in enumerate(offsets, 1)]


def test_eta_after_a_restart_uses_the_previous_attempts_rate_and_start_up():
    t0 = 1_800_000_000.0
    attempts = _attempts(t0, 0, 100)
    progress = ShardProgress()
    # attempt 1: first commit 30 s after its start, then 800 tokens every 10 s (80 tok/s); killed at t0 + 60
    for k in range(4):
        _commit(progress, 1, 800, t0 + 30 + 10 * k)
    # 100 prompts, 32 committed at 100 tokens each: 68 x 100 = 6,800 tokens left
    before = eta.shard_eta(progress, attempts, 100, now=t0 + 105)
    # attempt 2 started at t0 + 100, nothing committed: it starts producing after 30 s of start-up (t0 + 130),
    # then 6,800 / 80 = 85 s: finish at t0 + 215, 110 s after now
    assert (before["tok_per_s"], before["remaining_tokens"], before["eta_s"]) == (80.0, 6800, 110)
    for k in range(2):  # attempt 2 commits twice, 10 s apart, 1,600 tokens each: 160 tok/s from its own parts
        _commit(progress, 2, 1600, t0 + 140 + 10 * k)
    after = eta.shard_eta(progress, attempts, 100, now=t0 + 151)
    # 48 committed, mean output (3,200 + 3,200) / 48 = 133.3 tokens, 52 left = 6,933 tokens; 6,933 / 160 = 43.3 s
    # after the newest commit (t0 + 150): 42 s after now
    assert after["tok_per_s"] == 160.0 and after["remaining_tokens"] == 6933
    assert after["eta_s"] == round(t0 + 150 + 6933.3 / 160 - (t0 + 151))


def test_eta_counts_what_is_left_by_the_limits_of_the_prompts_left():
    """Short answers finish first: their mean length says little about the long ones still to come, their limits do."""
    t0 = 1_800_000_000.0
    progress = ShardProgress()
    # 16 short answers committed (limit 100, 75 tokens each: 75% of the budget used), 1,200 tokens in 10 s
    for k in range(2):
        _commit(progress, 1, 600, t0 + 30 + 10 * k, budget=800)
    # the shard: those 16 and 8 long prompts of limit 1,000: budget 1,600 + 8,000
    shard = eta.shard_eta(progress, _attempts(t0, 0), 24, now=t0 + 40, budget=9600)
    assert shard["remaining_tokens"] == 6000  # (9,600 - 1,600) x 0.75, not 8 x 75
    assert shard["tok_per_s"] == 60.0 and shard["eta_s"] == 100
    # without the split's budget (an older split): prompts left x the mean committed length
    assert eta.shard_eta(progress, _attempts(t0, 0), 24, now=t0 + 40)["remaining_tokens"] == 600


def test_no_run_eta_while_work_waits_and_nothing_generates():
    """After `reset 1`: shard 0 done, shard 1 waiting with nothing committed. The run is not done in 0 s."""
    done = {"prompts": 10, "rows": 10, "output_tokens": 1000, "remaining_tokens": 0, "tok_per_s": 0.0, "eta_s": 0}
    waiting = {"prompts": 10, "rows": 0, "output_tokens": 0, "remaining_tokens": None, "tok_per_s": None,
               "eta_s": None}
    run = eta.run_eta([done, waiting])
    assert run["eta_s"] is None and run["output_tokens_share"] == 0.5
    assert "no ETA yet" in eta.render(run) and "None" not in eta.render(run)
    finished = eta.run_eta([done, dict(done)])
    assert finished["eta_s"] == 0 and "nothing generating now" in eta.render(finished)  # all done: done now
    assert "None" not in eta.render(finished)
