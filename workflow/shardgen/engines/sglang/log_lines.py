"""SGLang's log lines, read (`read`: what `SGLangEngine.read_log_line` says of a line): the scheduler's periodic
"Decode batch"/"Prefill batch" lines become telemetry rows (the schema is tables.TELEMETRY; engines/telemetry.py
commits them), start-up lines the pool sizes that cap concurrency and the settings it runs with, a retraction line
a Retraction, torch's and SGLang's out-of-memory words a death."""

import re
from datetime import datetime, timezone

from shardgen.engines import LogLine, RunSettings
from shardgen.engines.retractions import Retraction
from shardgen.engines.sglang.args import logged_server_args, run_settings

_TS = r"^\[(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{3})?)[^\]]*\] "
_USAGE = (r"(?:full token usage: (?P<full>[\d.]+)(?:, swa token usage: [\d.]+)?"
          r"(?:, mamba usage: (?P<mamba_use>[\d.]+))?"
          r"|token usage: (?P<tok_use>[\d.]+))")
DECODE = re.compile(
    _TS + r"Decode batch(?: \[\d+\])?, #running-req: (?P<running>\d+), "
    r"(?:#full token: (?P<full_tok>\d+), full token usage: (?P<full>[\d.]+), (?:#swa token: \d+, swa token usage: "
    r"[\d.]+, )?mamba num: (?P<mamba_num>\d+), mamba usage: (?P<mamba_use>[\d.]+)|#token: (?P<tok>\d+), token usage: "
    r"(?P<tok_use>[\d.]+))"
    r".*?(?:cuda|cpu|npu|musa) graph: (?P<graph>True|False), gen throughput \(token/s\): (?P<gen>[\d.]+), "
    r"#queue-req: (?P<queue>\d+)")
PREFILL = re.compile(
    _TS + r"Prefill batch(?: \[\d+\])?, #new-seq: (?P<new_seq>\d+), #new-token: (?P<new_token>\d+), "
    r"#cached-token: (?P<cached>\d+), " + _USAGE + r", #running-req: (?P<running>\d+), #queue-req: (?P<queue>\d+)"
    r".*?(?:cuda|cpu|npu|musa) graph: (?P<graph>True|False), input throughput \(token/s\): (?P<input>[\d.]+)")
STARTUP = {
    "max_running_requests": re.compile(r"max_total_num_tokens=(\d+), .*?max_running_requests=(\d+)"),
    "max_mamba_cache_size": re.compile(
        r"Mamba Cache is allocated\. max_mamba_cache_size: (\d+), "
        r"conv_state size: ([\d.]+)GB, ssm_state size: ([\d.]+)GB"),
    "kv": re.compile(r"KV Cache is allocated\. .*?#tokens: (\d+), K size: ([\d.]+) GB, V size: ([\d.]+) GB"),
}

# The scheduler's warning when a decode step finds the KV pool full (0.5.13.post1 and 0.5.17, scheduler.py): "KV cache
# pool is full. Retract requests. #retracted_reqs: N, #new_tokens_gained: T[, #mamba_num_gained: M], #new_token_ratio:
# a -> b". T is the pool's free tokens after minus before: the retracted requests' KV, freed without entering the
# prefix cache (release_kv_cache(is_insert=False)), plus any cache entries evicted with it. SGLang 0.4 (early 2025)
# said "Decode out of memory happened. #retracted_reqs: N, #new_token_ratio: a -> b", with no token count.
RETRACT = re.compile(r"(?:KV cache pool is full\. Retract requests\.|Decode out of memory happened\.) "
                     r"#retracted_reqs: (?P<requests>\d+)(?:, #new_tokens_gained: (?P<tokens>-?\d+))?")
# Every tensor-parallel rank's scheduler logs the same retraction, its prefix naming the rank ("[... TP3] "): only
# rank 0's line (or an untagged one, tp_size 1) counts. Data-parallel ranks (DP<n>) retract each in its own pool.
OTHER_TP_RANK = re.compile(r"^\[[^\]]* TP(?!0\b)\d+\b")
OOM_MARKERS = ("CUDA out of memory", "OutOfMemoryError", "out of memory")  # torch's words, and SGLang's


def _ts(text: str) -> datetime:
    fmt = "%Y-%m-%d %H:%M:%S.%f" if "." in text else "%Y-%m-%d %H:%M:%S"
    return datetime.strptime(text, fmt).replace(tzinfo=timezone.utc)


def _num(value, cast):
    return cast(value) if value is not None else None


def parse_line(line: str) -> dict | None:
    """One telemetry row for a Decode or Prefill batch line, else None. SGLang logs local time; we run in UTC."""
    if m := DECODE.search(line):
        usage = m["full"] or m["tok_use"]
        return {"ts": _ts(m["ts"]), "kind": "decode", "running": int(m["running"]), "queue": int(m["queue"]),
                "full_token_usage": float(usage), "mamba_num": _num(m["mamba_num"], int),
                "mamba_usage": _num(m["mamba_use"], float), "cuda_graph": m["graph"] == "True",
                "gen_throughput": float(m["gen"]), "new_seq": None, "new_token": None, "cached_token": None,
                "input_throughput": None, "full_tokens": int(m["full_tok"] or m["tok"])}  # not in TELEMETRY: logs only
    if m := PREFILL.search(line):
        return {"ts": _ts(m["ts"]), "kind": "prefill", "running": int(m["running"]), "queue": int(m["queue"]),
                "full_token_usage": float(m["full"] or m["tok_use"]), "mamba_num": None,
                "mamba_usage": _num(m["mamba_use"], float), "cuda_graph": m["graph"] == "True",
                "gen_throughput": None, "new_seq": int(m["new_seq"]), "new_token": int(m["new_token"]),
                "cached_token": int(m["cached"]), "input_throughput": float(m["input"])}
    return None


def parse_retraction(line: str) -> Retraction | None:
    """A retraction line's requests and the KV tokens they gave back, else None (also for another TP rank's copy)."""
    if (m := RETRACT.search(line)) and not OTHER_TP_RANK.search(line):
        return Retraction(int(m["requests"]), _num(m["tokens"], int))
    return None


def parse_startup(line: str, facts: dict) -> None:
    """Collect the pool sizes SGLang prints at start-up into `facts`."""
    if m := STARTUP["max_running_requests"].search(line):
        facts.update(max_total_num_tokens=int(m[1]), max_running_requests=int(m[2]))
    elif m := STARTUP["max_mamba_cache_size"].search(line):
        facts.update(max_mamba_cache_size=int(m[1]), mamba_pool_gb=round(float(m[2]) + float(m[3]), 2))
    elif m := STARTUP["kv"].search(line):
        facts.update(kv_pool_tokens=int(m[1]), kv_pool_gb=round(float(m[2]) + float(m[3]), 2))


def parse_settings(line: str) -> RunSettings | None:
    """The settings a `server_args=ServerArgs(...)` start-up line names, else None."""
    logged = logged_server_args(line)
    return run_settings(logged) if logged is not None else None


def read(line: str) -> LogLine:
    """A scheduler's batch line is a telemetry row, and progress where its decode generated tokens; else a
    retraction, a start-up line's pool sizes or settings, or an out-of-memory error."""
    if row := parse_line(line):
        return LogLine(row=row, progress=row["kind"] == "decode" and bool(row["gen_throughput"]))
    facts: dict = {}
    parse_startup(line, facts)
    retraction = parse_retraction(line)  # SGLang 0.4's said "Decode out of memory": not a death
    return LogLine(facts=facts, settings=parse_settings(line), retraction=retraction,
                   out_of_memory=any(m in line for m in OOM_MARKERS) and not RETRACT.search(line))
