"""The status ETA's arithmetic on commits laid out by hand. Its accuracy on a real run (within 10% of the duration
once 10% of the output tokens are committed) is a wall-time figure, measured by benchmarks/workflow/eta_accuracy.py
(tests/benchmarks runs its CPU path)."""

from datetime import datetime

from shardgen.generate.progress import Commit, ShardProgress
from shardgen.report import eta


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
