"""The rules: what limits a run's throughput, each finding with its evidence lines and the settings to change.
Findings: mamba_pool_bound, kv_bound, running_cap_bound, feeder_bound, cuda_graph_uncovered, compute_saturated,
prefill_heavy, retractions, prefix_cache_low, capture_pass. The rules name shardgen's neutral keys; a setting only
the run's backend has comes from it (`Run.advice`: engines/advice.py's bounds)."""

from dataclasses import dataclass, field

from shardgen.report import efficiency
from shardgen.report.diagnose_run import Run

# A prefix cache that is on but takes less than this share of the prompt tokens prefill reads is named where prefill
# dominates; a shard's later turns are judged against what they share with their previous turn, the cache's goal
# being at least SERVED_GOAL of it.
LOW_CACHE_SHARE, SERVED_GOAL = 0.1, 0.8


@dataclass
class Finding:
    code: str
    message: str
    advice: list[str]
    evidence: list[str] = field(default_factory=list)


def _evidence(run: Run, indices: list[int], n: int = 3) -> list[str]:
    return [run.lines[i] for i in indices[:n]]


def diagnose(run: Run, eff: dict | None = None) -> list[Finding]:
    cap = run.facts.get("max_running_requests")
    decode = [i for i, r in enumerate(run.rows) if r["kind"] == "decode"]
    busy_until = max((i for i, r in enumerate(run.rows) if r["queue"] > 0), default=-1)  # queue drains for good after
    steady = [i for i in decode if i <= busy_until]
    findings = []
    if cap and steady:
        at_cap = [i for i in steady if run.rows[i]["running"] >= cap - 1]
        below = [i for i in steady if run.rows[i]["queue"] == 0 and run.rows[i]["running"] < cap - 1]
        held = [i for i in steady if run.rows[i]["queue"] > 0 and run.rows[i]["running"] < cap - 1]
        if len(at_cap) >= len(steady) / 2:
            findings += _cap_findings(run, cap, at_cap)
        elif len(held) >= len(steady) / 2:
            findings += _admission_findings(run, cap, held)
        if len(below) >= max(1, len(steady) / 5) and not run.hidden_pass.get("turns"):
            findings.append(Finding(
                "feeder_bound", f"the queue was empty while {len(below)} of {len(steady)} decode batches ran below "
                f"the cap of {cap}: the client is not feeding the engine",
                ["raise engine.inflight (the window is inflight x max running requests)",
                 "check that the driver's window covers the cap (engine.max_running_requests)"],
                _evidence(run, below)))
    if run.graph_limit is not None:
        eager = [i for i in decode if not run.rows[i]["cuda_graph"] and run.rows[i]["running"] > run.graph_limit]
        if eager:
            top = max(run.rows[i]["running"] for i in eager)
            findings.append(Finding(
                "cuda_graph_uncovered", f"{len(eager)} decode batches ran without CUDA graphs at batch sizes above "
                f"the graph limit {run.graph_limit} (up to {top})", run.advice("graph_limit", running=top),
                _evidence(run, eager)))
    findings += _saturation(run, steady, eff) + _prefill(run, steady) + _retractions(run) + _prefix_cache(run)
    findings += _capture_pass(run)
    codes = {f.code for f in findings}
    for f in findings:
        if f.code == "running_cap_bound" and "compute_saturated" in codes:
            f.advice = ["raising max_running_requests buys little: decode throughput is flat across running "
                        "(compute_saturated); the room above is for longer outputs"] + f.advice[1:]
    return findings


def _cap_findings(run: Run, cap: int, at_cap: list[int]) -> list[Finding]:
    kv = max(run.rows[i]["full_token_usage"] for i in at_cap)
    slots = run.settings.mamba_slots_per_request
    pool = run.pools.mamba_slots
    sized_to_cap = run.strategy == "no_radix" and pool == cap  # max_running_requests chose the pool, not memory
    if pool and slots and not sized_to_cap and abs(pool / slots - cap) <= 0.1 * cap and kv < 0.5:
        return [Finding(
            "mamba_pool_bound", f"running stayed at the cap of {cap}, set by the mamba state pool ({pool} slots / "
            f"{slots} per request with {run.strategy}), while KV usage was only {kv:.2f}"
            + ("; mamba usage reads ~0.66-0.72 here because of reserved slots" if run.strategy != "no_radix" else ""),
            run.advice("mamba_pool"), _evidence(run, at_cap))]
    if kv >= 0.85:
        return [Finding("kv_bound", f"running stayed at the cap of {cap} with KV usage {kv:.2f}",
                        ["raise engine.memory_share, or lower max_new_tokens / context_length"]
                        + run.advice("kv_at_cap"), _evidence(run, at_cap))]
    waiting = [i for i in at_cap if run.rows[i]["queue"] > 0]
    return [_running_cap(run, cap, waiting, kv, sized_to_cap)] if waiting else []


def _running_cap(run: Run, cap: int, waiting: list[int], kv: float, sized_to_cap: bool) -> Finding:
    """The user's max_running_requests caps the run with work waiting: how many more requests the pools hold at
    the largest tokens per request seen (each extra no_radix request also takes a mamba slot out of KV memory)."""
    facts, pools, queue = run.facts, run.pools, max(run.rows[i]["queue"] for i in waiting)
    per_request = max((efficiency.context_tokens(run.rows[i], facts) or 0) / run.rows[i]["running"] for i in waiting)
    room = "KV room left: unknown (no pool sizes in the log)"
    more = None
    # sized_to_cap: the pool's slots reported, and its GB with them (SGLang's one line says both)
    slot_gb = (pools.mamba_gb / pools.mamba_slots
               if sized_to_cap and pools.mamba_gb is not None and pools.mamba_slots else 0)
    if (tokens := pools.kv_tokens) and (kv_gb := pools.kv_gb) and (
            cost_gb := slot_gb + per_request * kv_gb / tokens):
        free_gb = kv_gb * (1 - kv)
        more = int(free_gb / cost_gb)
        room = (f"KV usage peaked at {kv:.2f} ({free_gb:.1f} of {kv_gb} GB free); at {per_request:.0f} tokens per "
                f"request" + (f" and {slot_gb * 1000:.1f} MB of mamba state each" if slot_gb else "") +
                f" about {more} more requests fit")
    advice = ([f"raise max_running_requests to about {cap + int(more * 0.8)} (80% of the room, as outputs grow)"]
              if more else ["raising max_running_requests needs KV room: raise engine.memory_share first"])
    advice += run.advice("running_cap")  # after the cap's line: diagnose replaces that one when compute-saturated
    return Finding("running_cap_bound", f"running stayed at max_running_requests = {cap} with up to {queue} requests "
                   f"waiting: your cap, not memory, limits the run; {room}", advice, _evidence(run, waiting))


def _admission_findings(run: Run, cap: int, held: list[int]) -> list[Finding]:
    """Requests waited while running stayed below the cap: the scheduler admitted no more for lack of KV room."""
    kv = max(run.rows[i]["full_token_usage"] for i in held)
    running = max(run.rows[i]["running"] for i in held)
    if kv < 0.85:
        return []
    advice = [f"max_running_requests: {running} (what the KV pool holds at these lengths), or raise "
              "engine.memory_share"] + run.advice("kv_admission")
    return [Finding("kv_bound", f"running held at {running}, below the cap of {cap}, with requests waiting and KV "
                    f"usage up to {kv:.2f}: the KV pool limits admission", advice, _evidence(run, held))]


def _saturation(run: Run, steady: list[int], eff: dict | None) -> list[Finding]:
    if efficiency.near_compute_peak(eff):
        return [Finding("compute_saturated", f"decode reached {eff['achieved_tflops']} of {eff['peak_tflops']} "
                        f"TFLOP/s ({eff['of_peak_tflops']:.0%} of the {eff['gpu']} peak): the GPU is saturated",
                        ["raising the running cap will not help; keep the current cap"],
                        _evidence(run, steady or [i for i, r in enumerate(run.rows) if r["kind"] == "decode"]))]
    decode = [i for i, r in enumerate(run.rows) if r["kind"] == "decode"]  # the tail too: running falls there
    by_running: dict[int, list[float]] = {}
    for i in decode:
        by_running.setdefault(run.rows[i]["running"], []).append(run.rows[i]["gen_throughput"])
    if len(by_running) < 2:
        return []
    low, high = min(by_running), max(by_running)
    rate = {k: sorted(v)[len(v) // 2] for k, v in by_running.items()}
    if high >= 1.5 * low and rate[high] < 1.1 * rate[low]:
        roofline = (f"; the roofline says {eff['bound']}-bound, {eff['dominant_bytes']} moving the most bytes, at "
                    f"{eff['of_peak_tflops']:.0%} of the FLOP/s and {eff['of_peak_tbps']:.0%} of the bandwidth peak"
                    if eff else "")
        state = eff["dtypes"]["ssm_state"] if eff and "M" in eff["layers"] else None  # M: a Mamba layer
        return [Finding("compute_saturated", f"decode throughput stayed flat ({rate[low]:.0f} -> {rate[high]:.0f} "
                        f"tok/s) across running {low} -> {high}: more running requests add no throughput, the GPU "
                        f"is saturated at this step cost{roofline}",
                        ["raising the running cap will not help; keep the current cap"]
                        + run.advice("compute", mamba_state_dtype=state),
                        [run.lines[next(i for i in reversed(decode) if run.rows[i]["running"] == k)]
                         for k in (high, low)])]
    return []


def _prefill(run: Run, steady: list[int]) -> list[Finding]:
    """Prompt tokens prefilled vs tokens generated (decode-line throughput x the time between decode lines),
    judged only when decode ran with a waiting queue (a run that prefills everything at once is not this)."""
    if not steady:
        return []
    prefill = [i for i, r in enumerate(run.rows) if r["kind"] == "prefill"]
    decode = [i for i, r in enumerate(run.rows) if r["kind"] == "decode"]
    generated = sum(run.rows[b]["gen_throughput"] * (run.rows[b]["ts"] - run.rows[a]["ts"]).total_seconds()
                    for a, b in zip(decode, decode[1:]))
    # the capture pass's prefill of every captured position is its own phase (_capture_pass), not the prompts'
    prompt_tokens = sum(run.rows[i]["new_token"] for i in prefill) - int(run.hidden_pass.get("positions") or 0)
    if not generated or prompt_tokens <= 2 * generated:
        return []
    message = f"{prompt_tokens} prompt tokens were prefilled for ~{generated:.0f} generated: prefill, not decode, " \
              "takes most of the GPU"
    advice = run.advice("prefill")
    cached = sum(run.rows[i].get("cached_token") or 0 for i in prefill)
    share = cached / (cached + prompt_tokens)
    if run.prefix_cache_on(cached) and share < LOW_CACHE_SHARE:
        message += (f"; the prefix cache is on ({run.strategy or 'the log shows cached tokens'}) but gave only "
                    f"{cached} of the {cached + prompt_tokens} prompt tokens ({share:.1%})")
        advice += ["if the prompts share prefixes (each_turn conversations, a long system prompt), the cache evicts "
                   "them before they are reused: " + _KEEP_HISTORIES] + run.advice("prefix_cache_unused")
    else:
        advice += run.advice("prefix_cache_kept")
    return [Finding("prefill_heavy", message, advice, _evidence(run, prefill))]


# Fewer conversations in flight, or more KV memory, keep the histories the cache holds between turns.
_KEEP_HISTORIES = ("fewer in flight keep them (lower engine.max_running_requests, or engine.inflight: the driver "
                   "keeps inflight x the cap in flight, a conversation holding its place from turn to turn), or "
                   "more KV room does (raise engine.memory_share)")


def _prefix_cache(run: Run) -> list[Finding]:
    """A shard's later turns resend their conversation's history (the done file's prefix_cache_by_turn): a prefix
    cache that is on but gave less than SERVED_GOAL of the tokens they share with their previous turn."""
    later = [t for t in run.prefix_cache_by_turn if t["turn"] > 1 and t["shared_tokens"]]
    shared = sum(t["shared_tokens"] for t in later)
    cached = sum(t["cached_tokens"] or 0 for t in later)
    prompt = sum(t["prompt_tokens"] or 0 for t in run.prefix_cache_by_turn)
    every = sum(t["cached_tokens"] or 0 for t in run.prefix_cache_by_turn)
    if not shared or not run.prefix_cache_on(every) or cached >= SERVED_GOAL * shared:
        return []
    per_turn = ", ".join(f"turn {t['turn']} {(t['cached_tokens'] or 0) / t['shared_tokens']:.0%}" for t in later)
    return [Finding(
        "prefix_cache_low", f"the prefix cache is on ({run.strategy or 'its strategy not recorded'}) but gave only "
        f"{cached} of the {shared} tokens later turns share with their conversation's previous turn "
        f"({cached / shared:.0%}; {per_turn}), {every} of all {prompt} prompt tokens "
        f"({every / prompt if prompt else 0:.1%}): it evicted histories before their next turn came, and they were "
        f"prefilled again", ["keep the histories: " + _KEEP_HISTORIES],
        [f"prefix_cache_by_turn: {t}" for t in later[:3]])]


def _retractions(run: Run) -> list[Finding]:
    """Requests the engine took back because its KV pool was full: each is prefilled again when readmitted."""
    tally = run.retracted
    events = tally.events if tally and tally.events else len(run.retractions)
    if not events:
        return []
    said = [f"{tally.requests} requests"] if tally and tally.events else []
    if tally and tally.events > tally.uncounted:
        counted = f" (as {tally.events - tally.uncounted} of the {tally.events} lines say)" if tally.uncounted else ""
        estimate = "; with the prefix cache on, an estimate" if run.settings.prefix_cache else ""
        said.append(f"{tally.tokens} tokens of KV given back{counted}: their prompts and what they had generated, "
                    f"prefilled again when readmitted{estimate}")
    cost = f" ({', '.join(said)})" if said else ""
    full = [r["running"] for r in run.rows if r["kind"] == "decode" and r["queue"] and r["full_token_usage"] >= 0.95]
    held = f"; with the pool full and requests waiting, running fell to {min(full)}" if full else ""
    advice = [f"lower engine.max_running_requests to about {min(full)}, what the full KV pool held"
              if full else "lower engine.max_running_requests so the running requests' KV fits the pool",
              "or give KV more room: raise engine.memory_share, or lower max_new_tokens"]
    evidence = run.retractions[:3] or ([f"engine.retractions: {tally.as_dict()}"] if tally else [])
    return [Finding("retractions", f"the KV pool filled and the engine retracted running requests {events} times"
                    + cost + held, advice, evidence)]


def _capture_pass(run: Run) -> list[Finding]:
    """Hidden-state capture (the done file's engine.hidden_pass): a second prefill of every captured position, with
    its own time: while turns wait in their pass, decode runs below the cap with an empty queue (not the feeder)."""
    record = run.hidden_pass
    if not record.get("turns"):
        return []
    hook = record.get("hook") or {}
    return [Finding(
        "capture_pass", f"{record['turns']} turns were captured: a second prefill of their {record['positions']} "
        f"positions (prompt and output) through the hidden-state hooks; the passes' wall summed over turns "
        f"{record['pass_s']:.0f} s (they overlap generation), the hooks held the scheduler "
        f"{hook.get('scheduler_s', 0):.1f} s, "
        f"the writer thread wrote {hook.get('bytes', 0) / 1e9:.1f} GB in {hook.get('write_s', 0):.0f} s, reading and "
        f"encoding took {record.get('read_s', 0) + record.get('encode_s', 0):.0f} s",
        ["capture costs about a prefill of every position (docs/performance.md gives the measured share): capture "
         "only the sources a drafter trains on (a source's own hidden_states: false)",
         "fewer layers copy and write fewer bytes (capture.hidden_states.layers: dflash, or an explicit list)"],
        [f"engine.hidden_pass: {record}"])]
