"""The pyarrow schema of every table shardgen writes: one place, read by every stage and by the tests."""

import pyarrow as pa

MESSAGES = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
TOKENS = pa.list_(pa.int32())
UTC = pa.timestamp("us", tz="UTC")

PROMPTS = pa.schema([
    ("prompt_id", pa.string()), ("gen_key", pa.string()), ("source", pa.string()), ("source_row", pa.int64()),
    ("messages", MESSAGES), ("prompt_ids", TOKENS), ("prompt_tokens", pa.int32()), ("max_new_tokens", pa.int32()),
    ("temperature", pa.float64()), ("top_p", pa.float64()), ("top_k", pa.int32()),
    ("sampling_extra", pa.string()), ("reference", pa.string()), ("dropped_turns", pa.int32()),
])
REJECTED = pa.schema([("source", pa.string()), ("source_row", pa.int64()), ("reason", pa.string()),
                      ("detail", pa.string())])
DUPLICATES = pa.schema([("source", pa.string()), ("source_row", pa.int64()), ("prompt_id", pa.string()),
                        ("kept_source", pa.string())])
# One row per source: where it came from and what reading it cost (the manifest's per-source facts).
SOURCES = pa.schema([("source", pa.string()), ("origin", pa.string()), ("fingerprint", pa.string()),
                     ("rows_read", pa.int64()), ("system_replaced", pa.int64())])
PART = pa.schema([
    ("prompt_id", pa.string()), ("gen_key", pa.string()), ("shard", pa.int32()), ("attempt", pa.int32()),
    ("completion", pa.string()), ("output_ids", TOKENS), ("finish_reason", pa.string()),
    ("prompt_tokens", pa.int32()), ("completion_tokens", pa.int32()), ("cached_tokens", pa.int32()),
    ("latency_s", pa.float64()), ("submitted_at", UTC), ("finished_at", UTC), ("gpu", pa.string()),
    ("error", pa.string()),
])
DATASET = pa.schema([
    ("prompt_id", pa.string()), ("gen_key", pa.string()), ("source", pa.string()), ("messages", MESSAGES), ("prompt_ids", TOKENS),
    ("completion", pa.string()), ("output_ids", TOKENS), ("finish_reason", pa.string()),
    ("prompt_tokens", pa.int32()), ("completion_tokens", pa.int32()), ("reference", pa.string()),
])
# SGLang's scheduler lines per interval (engines/telemetry.py parses them), plus our own "client" rows.
TELEMETRY = pa.schema([
    ("ts", pa.timestamp("ms", tz="UTC")), ("kind", pa.string()), ("running", pa.int32()), ("queue", pa.int32()),
    ("full_token_usage", pa.float64()), ("mamba_num", pa.int32()), ("mamba_usage", pa.float64()),
    ("cuda_graph", pa.bool_()), ("gen_throughput", pa.float64()), ("new_seq", pa.int32()), ("new_token", pa.int32()),
    ("cached_token", pa.int32()), ("input_throughput", pa.float64()),
])
