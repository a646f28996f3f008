"""The ETA of a running shard and of the whole run, in output tokens.

rate = the tokens the current attempt committed over the newer half of its commits / the time they span: engine
start-up, warm-up (on the CPU the first batches run several times slower) and the fill (the first completions
arrive a whole request latency after the engine starts) are left out, a change of speed is followed, and the
measurement ends at a commit (between commits nothing looks slower). ETA = newest commit +
remaining tokens / rate, remaining = the prompts left x the mean committed output length. The tail (the queue
empty, the last window of requests finishing with fewer and fewer running) needs no extra term: by Little's law
the running requests at full rate take one mean request latency to finish, about what the last ones take anyway;
what it leaves out is the spread of output lengths (the longest last requests). Restarts: an attempt with fewer
than two commits is timed with the previous attempt's rate, starting after the previous attempt's start-up
(its start to its first commit) has passed; tokens committed by earlier attempts count as done."""

import json
from contextlib import suppress
from datetime import datetime
from pathlib import Path

import pyarrow.parquet as pq

from shardgen.attempts import read_attempts
from shardgen.layout import PARTS_INDEX, part_files


def _parts(shard_dir: Path) -> list[dict]:
    """attempt, rows, tokens and commit time (mtime) of every committed part (the index, else the part)."""
    index = {}
    with suppress(FileNotFoundError):
        for line in (shard_dir / PARTS_INDEX).read_text().splitlines():
            with suppress(ValueError, KeyError):
                entry = json.loads(line)
                index[entry["part"]] = {"attempt": entry["attempt"], "rows": entry["rows"], "tokens": entry["tokens"]}
    parts = []
    for path in part_files(shard_dir):
        if (entry := index.get(path.name)) is None:
            table = pq.read_table(path, columns=["attempt", "completion_tokens"])
            entry = {"attempt": table["attempt"][0].as_py() if table.num_rows else 0, "rows": table.num_rows,
                     "tokens": sum(table["completion_tokens"].to_pylist())}
        parts.append({**entry, "at": path.stat().st_mtime})
    return parts


def _rate(attempt: dict, parts: list[dict]) -> tuple[float, float, float] | None:
    """(tokens/s over the newer half of the attempt's commits, first commit, newest commit), or None before its
    second commit."""
    mine = sorted((p for p in parts if p["attempt"] == attempt["attempt"]), key=lambda p: p["at"])
    base = mine[(len(mine) - 1) // 2] if len(mine) >= 2 else None
    if base is None or mine[-1]["at"] <= base["at"]:
        return None
    newer = mine[(len(mine) - 1) // 2 + 1:]
    return sum(p["tokens"] for p in newer) / (mine[-1]["at"] - base["at"]), mine[0]["at"], mine[-1]["at"]


def shard_eta(shard_dir: Path, prompts: int, now: float) -> dict:
    parts, attempts = _parts(shard_dir), read_attempts(shard_dir)
    rows, tokens = sum(p["rows"] for p in parts), sum(p["tokens"] for p in parts)
    out = {"prompts": prompts, "rows": rows, "output_tokens": tokens, "remaining_tokens": None, "tok_per_s": None,
           "eta_s": None}
    if not attempts or not rows:
        return out
    remaining = max(0, prompts - rows) * tokens / rows
    out["remaining_tokens"] = round(remaining)
    last = attempts[-1]
    if measured := _rate(last, parts):
        rate, since = measured[0], measured[2]
    elif len(attempts) > 1 and (previous := _rate(attempts[-2], parts)):
        startup = previous[1] - datetime.fromisoformat(attempts[-2]["started_at"]).timestamp()
        rate, since = previous[0], max(now, datetime.fromisoformat(last["started_at"]).timestamp() + startup)
    else:
        return out
    out.update(tok_per_s=round(rate, 1), eta_s=round(max(0.0, since + remaining / rate - now)))
    return out


def run_eta(shards: list[dict]) -> dict:
    """Shards run side by side: the run ends with its last shard, and never before the total remaining work at the
    total current rate (shards not yet started wait for a free GPU)."""
    running = [s for s in shards if s["eta_s"] is not None]
    committed, rows = sum(s["output_tokens"] for s in shards), sum(s["rows"] for s in shards)
    mean = committed / rows if rows else 0  # for shards with nothing committed yet
    remaining = sum(s["remaining_tokens"] if s["remaining_tokens"] is not None else s["prompts"] * mean
                    for s in shards)
    rate = sum(s["tok_per_s"] for s in running)
    eta = max([s["eta_s"] for s in running] + ([remaining / rate] if rate else []), default=None)
    share = committed / (committed + remaining) if committed + remaining else None
    return {"eta_s": round(eta) if eta is not None else None, "output_tok_per_s": round(rate, 1) if rate else None,
            "output_tokens_committed": committed, "output_tokens_share": round(share, 4) if share else None}


def annotate(layout, rows: list[dict], now: float | None = None) -> dict:
    """Replace each status row's eta_s by the token-based one; return the whole run's (done shards count as 0)."""
    import time

    now = time.time() if now is None else now
    shards = []
    for row in rows:
        shard = shard_eta(layout.shard_dir(row["shard"]), row.get("turns_expected", row["prompts"]), now)
        if row["done"]:
            shard.update(remaining_tokens=0, eta_s=0, tok_per_s=0.0)
        down = row.get("state", "").startswith("down")
        if down:  # nothing runs now; the run's ETA still counts it, at its last rate, as if restarted
            shard["tok_per_s"] = 0.0
        row["eta_s"] = None if down else shard["eta_s"]
        shards.append(shard)
    run = run_eta(shards)
    run["down"] = [f"shard {r['shard']} ({r['state'][5:]}, silent {r['silent_s']} s)" for r in rows
                   if r.get("state", "").startswith("down")]
    return run


def render(run: dict) -> str:
    down = (f"; DOWN: {', '.join(run['down'])}: its share of the ETA assumes it is restarted (Snakemake retries, "
            "or a rerun)") if run.get("down") else ""
    if run["eta_s"] is None:
        return "run: no ETA yet (a rate needs two commits of one attempt)" + down
    share = f"{run['output_tokens_share']:.1%} of the output tokens committed" if run["output_tokens_share"] else ""
    hours = run["eta_s"] / 3600
    return (f"run: {share}, {run['output_tok_per_s']} output tok/s now, ETA {run['eta_s']} s ({hours:.1f} h) "
            "(rate since each attempt's engine start; see README: ETA)" + down)
