"""The storage plan's hidden states as this run captures them (config capture.hidden_states), every byte counted:
the parts' states files, forecast before the run as bytes per position (capture.HiddenCapture.bytes_per_token:
layers x hidden size x 2 for bfloat16, x 1 + a 4-byte scale for fp8) times every position of every captured source's
turn rows (prompt + output, what the engine's pass covers), and, once the run has files, what it wrote (the parts
index's `hidden_bytes`: the committed part-*.hidden.safetensors, superseded retries included); each trainer's export
only as what it would cost when made (`shardgen export-hidden`, merge/hidden_exports.py: none is written by the
run), and what one made under exports/hidden/ takes.

Before a shard generates, its remaining work's states are forecast the same way against the free space of the
results folder (generate/hidden_preflight.py)."""

from pathlib import Path

from shardgen.capture import HiddenCapture
from shardgen.engines.model_shape import ModelShape
from shardgen.generate import checkpoint
from shardgen.layout import Layout
from shardgen.merge.hidden_exports import TRAINERS, export_bytes_per_token, missing, roles


def written(layout: Layout) -> dict:
    """This run's hidden-state files: the parts index's hidden_bytes over every shard, and each export's bytes."""
    shards = layout.split_shards()
    parts = [e for shard in shards for e in checkpoint.ShardCheckpoint(layout, shard).index().values()]
    exports = {folder.name: sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
               for folder in sorted(layout.hidden_exports_dir.glob("*"))
               if folder.is_dir() and folder.name in TRAINERS} if layout.hidden_exports_dir.is_dir() else {}
    return {"parts_bytes": sum(e.get("hidden_bytes", 0) for e in parts),
            "parts_with_states": sum("hidden_bytes" in e for e in parts), "exports_bytes": exports}


def plan(hidden: HiddenCapture, shape: ModelShape, per_source: dict, layout: Layout) -> dict:
    """The forecast of the committed states at the configured layers, each export's cost when made, and what this
    run wrote where it wrote any."""
    layers_total, hidden_size = shape.decoder_size()
    if layers_total is None or hidden_size is None:
        return {"note": "the model's config.json has no num_hidden_layers or hidden_size"}
    per_token = hidden.bytes_per_token(layers_total, hidden_size)
    tokens = sum(load.turn_tokens for source, load in per_source.items() if hidden.wants(source))
    header = hidden.header(layers_total)
    role = roles(header)
    result = {"layer_set": hidden.layers if isinstance(hidden.layers, str) else list(hidden.layers),
              "layers": header["layers"], "dtype": hidden.dtype, "bytes_per_token": per_token,
              "sources": "all" if hidden.sources is None else sorted(hidden.sources), "tokens": tokens,
              "bytes": tokens * per_token,
              "exports_on_demand": {trainer: {"bytes_per_token": size, "bytes": tokens * size}
                                    for trainer in TRAINERS if missing(trainer, role) is None
                                    for size in [export_bytes_per_token(trainer, role, hidden.dtype, hidden_size)]}}
    this_run = written(layout)
    if this_run["parts_with_states"]:
        result["this_run"] = {**this_run, "parts_over_forecast": round(this_run["parts_bytes"] / max(tokens, 1)
                                                                       / per_token, 4)}
    return result


def render(planned: dict | None, human) -> list[str]:
    """The plan's lines for the captured states (none when capture is off)."""
    if planned is None:
        return []
    if "note" in planned:
        return [f"  captured by this run: no forecast ({planned['note']})"]
    lines = [f"  captured by this run ({planned['layer_set']}: {planned['layers']}, {planned['dtype']}): "
             f"{planned['bytes_per_token']:,} B per position x {planned['tokens']:,} positions = "
             f"{human(planned['bytes'])} in the parts (the one copy)"]
    on_demand = ", ".join(f"{name} {human(e['bytes'])}" for name, e in planned["exports_on_demand"].items())
    lines.append(f"    each export when made (shardgen export-hidden), where the trainer runs: {on_demand or 'none'}")
    if run := planned.get("this_run"):
        exports = ", ".join(f"{name} {human(size)}" for name, size in run["exports_bytes"].items()) or "none"
        lines.append(f"    written: parts {human(run['parts_bytes'])} ({run['parts_over_forecast']}x the forecast); "
                     f"exports under {Path('exports') / 'hidden'}: {exports}")
    return lines
