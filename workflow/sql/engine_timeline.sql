-- The scheduler's view per shard over time (SGLang telemetry): running, queue, KV and mamba usage, decode tok/s.
SELECT shard, ts, running, queue, full_token_usage, mamba_usage, gen_throughput
FROM telemetry WHERE kind = 'decode' ORDER BY shard, ts
