"""The pyarrow schema of every table shardgen writes: one place, read by every stage and by the tests."""

import pyarrow as pa

from shardgen.sampling import FIELDS

MESSAGES = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
TOKENS = pa.list_(pa.int32())
UTC = pa.timestamp("us", tz="UTC")
# The target's distribution on a turn's generated tokens (config `capture`; shardgen/capture.py): one entry per
# output_ids position: the chosen token's logprob, and the top-k token ids and logprobs (k = capture.top_k; empty
# lists at k 0). Null: the turn was generated without capture.
TOKEN_LOGPROBS = pa.list_(pa.float32())
TOP_IDS = pa.list_(pa.list_(pa.int32()))
TOP_LOGPROBS = pa.list_(pa.list_(pa.float32()))
# Per turn, from the chosen-token logprobs (null with neither capture nor capture.signal): their mean and minimum,
# and the mean over positions of the top-k entropy -sum(p log p) over the k entries (captured turns only; null at
# k 0). shardgen/capture.py computes them.
TURN_SIGNAL = [("logprob_mean", pa.float64()), ("logprob_min", pa.float64()), ("topk_entropy_mean", pa.float64())]
# One column per sampling field (shardgen.sampling.FIELDS), in its declared order: an integer field is int32, a
# number float64.
SAMPLING = [(f.name, pa.int32() if f.kind == "integer" else pa.float64()) for f in FIELDS]

PROMPTS = pa.schema([
    ("prompt_id", pa.string()), ("gen_key", pa.string()), ("source", pa.string()), ("source_row", pa.int64()),
    ("messages", MESSAGES), ("prompt_ids", TOKENS), ("prompt_tokens", pa.int32()), ("max_new_tokens", pa.int32()),
    # model.context_length the prompt set was built for: a turn after the first counts only while its prompt_tokens
    # + max_new_tokens fit it (winners.sql), so a conversation ends where a fresh run at this length ends it.
    ("context_length", pa.int32()),
    *SAMPLING, ("sampling_extra", pa.string()),
    # Field -> where its value came from (source, config.defaults, generation_config, neutral), as JSON.
    ("sampling_origin", pa.string()), ("reference", pa.string()), ("dropped_turns", pa.int32()),
    # One row per conversation. `messages`/`prompt_ids` are turn 1's prompt; `turns[t-1]` is the user text that
    # opens turn t (generate renders turn t >= 2 itself, over the regenerated answers), `references[t-1]` the
    # source's original answer to turn t (null: none). A `first` source has one turn. conversation_id =
    # prompt_id. work_tokens: the split's cost, sum over turns of (estimated prompt tokens + max_new_tokens).
    ("conversation_id", pa.string()), ("turns", pa.list_(pa.string())), ("references", pa.list_(pa.string())),
    ("work_tokens", pa.int64()),
])
# `id`: the source row's own `id` field as text, where it has one (null otherwise), to find the row by.
REJECTED = pa.schema([("source", pa.string()), ("source_row", pa.int64()), ("reason", pa.string()),
                      ("detail", pa.string()), ("id", pa.string())])
DUPLICATES = pa.schema([("source", pa.string()), ("source_row", pa.int64()), ("prompt_id", pa.string()),
                        ("kept_source", pa.string()), ("id", pa.string())])
# One row per source: where it came from and what reading it cost (the manifest's per-source facts).
# row_limit: the source's `limit` it was read with (null: none), so status can tell a changed limit before a rerun.
SOURCES = pa.schema([("source", pa.string()), ("origin", pa.string()), ("fingerprint", pa.string()),
                     ("rows_read", pa.int64()), ("system_replaced", pa.int64()), ("row_limit", pa.int64())])
PART = pa.schema([
    ("prompt_id", pa.string()), ("gen_key", pa.string()), ("shard", pa.int32()), ("attempt", pa.int32()),
    ("completion", pa.string()), ("output_ids", TOKENS), ("finish_reason", pa.string()),
    ("prompt_tokens", pa.int32()), ("completion_tokens", pa.int32()), ("cached_tokens", pa.int32()),
    ("latency_s", pa.float64()), ("submitted_at", UTC), ("finished_at", UTC), ("gpu", pa.string()),
    ("error", pa.string()),
    # One row per turn. base_key: the gen_key of the conversation's prompts row (the turn-1 key), so stale
    # turns (another model, template or sampling) are never current. messages/prompt_ids: turn t's exact prompt
    # for t >= 2 (null at turn 1: the prompts row has it). finish_reason may also be `context_exhausted` (the
    # conversation ended before this turn: nothing generated; `error` says why).
    ("conversation_id", pa.string()), ("turn", pa.int32()), ("base_key", pa.string()), ("messages", MESSAGES),
    ("prompt_ids", TOKENS),
    # The sampling the request was sent with (a source's listed field: this prompt's value). A part written
    # before these columns reads them as null (db.parquet_view).
    *SAMPLING,
    # Capture (config `capture`), committed with the turn: null when off, or in a part written before it existed.
    ("token_logprobs", TOKEN_LOGPROBS), ("top_ids", TOP_IDS), ("top_logprobs", TOP_LOGPROBS), *TURN_SIGNAL,
])
DATASET = pa.schema([
    ("prompt_id", pa.string()), ("gen_key", pa.string()), ("source", pa.string()), ("messages", MESSAGES),
    ("prompt_ids", TOKENS), ("completion", pa.string()), ("output_ids", TOKENS), ("finish_reason", pa.string()),
    ("prompt_tokens", pa.int32()), ("completion_tokens", pa.int32()), ("reference", pa.string()),
    # One row per generated turn (1-based; a `first` source has turn 1 only). messages: the exact list the
    # row's prompt_ids were rendered from (system, user 1, regenerated assistant 1, ..., user t); reference: the
    # source's original assistant turn t. prompt_id is the conversation's id (= conversation_id); gen_key is
    # the turn's own key.
    ("conversation_id", pa.string()), ("turn", pa.int32()),
    # The sampling the turn was generated with (its part row's; null for a row generated before they were kept),
    # and where the prompt set's values came from (its prompts row's sampling_origin).
    *SAMPLING, ("sampling_origin", pa.string()),
    # How sure the target was of the turn (its part row's; null where it was generated without capture).
    *TURN_SIGNAL,
    # The answer split at model.reasoning_tags by merge (shardgen/merge/reasoning.py): content (the whole
    # completion where nothing was split), reasoning_content (null: none, or never closed), reasoning_unclosed
    # (opened, never closed: flagged, not split).
    ("content", pa.string()), ("reasoning_content", pa.string()), ("reasoning_unclosed", pa.bool_()),
])
# The capture sidecar, exports/turns.topk.parquet: one row per turns.jsonl row whose turn was captured (same id),
# one entry per loss-masked position (the turn's output_ids, in order); compact: int32 ids, float16 logprobs.
# Hidden states can join it later as more columns of the same rows and positions.
TOPK_SIDECAR = pa.schema([
    ("id", pa.string()), ("logprobs", pa.list_(pa.float16())), ("top_ids", TOP_IDS),
    ("top_logprobs", pa.list_(pa.list_(pa.float16()))),
])
# `shardgen audit`, turns.parquet: one row per setting and sampled turn, the turn re-scored prefill-only under the
# setting. tokens: its output_ids; argmax_match / in_top_k: the fraction of them that are the re-scored argmax / in
# its top k; logprob_diff_*: |re-scored - generation-time| chosen-token logprob over its positions (null: generated
# without capture, or not comparable: another temperature, a repetition penalty); first_argmax_mismatch: the first
# position (0-based) whose token is not the argmax (null: none).
AUDIT_TURNS = pa.schema([
    ("setting", pa.string()), ("conversation_id", pa.string()), ("turn", pa.int32()), ("gen_key", pa.string()),
    ("tokens", pa.int32()), ("argmax_match", pa.float64()), ("in_top_k", pa.float64()),
    ("logprob_diff_mean_abs", pa.float64()), ("logprob_diff_max_abs", pa.float64()),
    ("first_argmax_mismatch", pa.int32()),
])
# A setting's scores of the audit sample (audit/score.py): per sampled turn, per output_ids position, the re-scored
# chosen-token logprob, the argmax and the top-k ids and logprobs, at `temperature` (engines/scoring.Scores).
AUDIT_SCORES = pa.schema([("gen_key", pa.string()), ("logprobs", TOKEN_LOGPROBS), ("argmax_ids", TOKENS),
                          ("top_ids", TOP_IDS), ("top_logprobs", TOP_LOGPROBS), ("temperature", pa.float64())])
# SGLang's scheduler lines per interval (engines/sglang/log_lines.py parses them), plus our own "client" rows; written
# as a shard's telemetry parts by engines/telemetry.py.
TELEMETRY = pa.schema([
    ("ts", pa.timestamp("ms", tz="UTC")), ("kind", pa.string()), ("running", pa.int32()), ("queue", pa.int32()),
    ("full_token_usage", pa.float64()), ("mamba_num", pa.int32()), ("mamba_usage", pa.float64()),
    ("cuda_graph", pa.bool_()), ("gen_throughput", pa.float64()), ("new_seq", pa.int32()), ("new_token", pa.int32()),
    ("cached_token", pa.int32()), ("input_throughput", pa.float64()),
])
