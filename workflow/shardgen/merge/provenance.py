"""What determined the generated tokens, for the exports' manifest and the report: the model, tokenizer and template
hashes; per shard the engine that generated it (from its done file's `engine` section: backend, SGLang version,
weight, KV-cache and SSM-state dtypes under every backend, as its backend reads them: `Backend.numerics`); per
source the sampling its prompt set was made with and where each value came from (`origin`: source, config.defaults,
generation_config or neutral; shardgen.sampling).
A drafter learns the target's numerics: a bfloat16 SSM state or an fp8 KV cache makes other tokens than the model
served in float32 / its own dtype would."""

import json
from pathlib import Path

import pyarrow.parquet as pq

from shardgen.generate.checkpoint import ShardCheckpoint
from shardgen.layout import Layout
from shardgen.sampling import names


def engine_numerics(engine: dict | None, model_dir: Path) -> dict:
    """One done file's engine section as the settings that change the numbers; None (the attempt that wrote the
    done file generated nothing: its rows came from an earlier attempt) says so."""
    if not engine:
        return {"backend": None, "note": "this run of the shard generated nothing; the done file of the run that "
                                         "did is overwritten, so its engine is not recorded here"}
    from shardgen.engines.registry import numerics_of

    return numerics_of(engine, model_dir)


def provenance(config, layout: Layout) -> dict:
    model = config.target_model
    engines = {}
    for shard in range(config.n_shards):  # the config's shards: a done file left by an earlier split is not data
        if (record := ShardCheckpoint(layout, shard).done()) is not None:
            engines[str(shard)] = engine_numerics(record.get("engine"), model.path)
    sampling: dict[str, list[dict]] = {}
    if layout.prompts.is_file():
        columns = ["source", "max_new_tokens", *names(), "sampling_extra", "sampling_origin"]
        table = pq.read_table(layout.prompts, columns=columns)
        for row in table.group_by(columns).aggregate([]).to_pylist():
            extra = json.loads(row.pop("sampling_extra") or "{}")
            origin = json.loads(row.pop("sampling_origin") or "{}")
            sampling.setdefault(row.pop("source"), []).append({**row, **extra, "origin": origin})
    return {"model": model.record(),
            "engines_per_shard": engines, "sampling_per_source": sampling}
