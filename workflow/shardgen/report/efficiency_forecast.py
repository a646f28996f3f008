"""The report's efficiency and forecast: per shard, how close decode came to the GPU (from its telemetry, the
model's config.json and the GPU its done file names, else hardware.gpu), and the time this run's measured per-GPU
rate gives for its prompts on the configured GPUs and per 100,000 prompts. summary.json keys `efficiency` and
`forecast`; the `outlook` figure and a report.md section show them."""

from pathlib import Path

from shardgen import ShardgenError
from shardgen.capture import Capture, HiddenCapture
from shardgen.generate import checkpoint
from shardgen.report import forecast as fc
from shardgen.report.diagnose import examine
from shardgen.layout import telemetry_files

PER = 100_000


def efficiency_rows(config, layout, done_files: list[Path]) -> list[dict]:
    hardware, rows = config.hardware, []
    for done in done_files:
        record = checkpoint.required_done(done)
        shard_dir = layout.shard_dir(record["shard"])
        if not telemetry_files(shard_dir):
            rows.append({"shard": record["shard"], "note": "no SGLang telemetry (CPU engine): no efficiency"})
            continue
        entry = examine(shard_dir, Path(config.model.path), None, hardware.peaks, hardware.gpu)
        eff = entry["efficiency"] or {}
        rows.append({"shard": record["shard"], **{k: eff.get(k) for k in (
            "gpu", "achieved_tflops", "peak_tflops", "of_peak_tflops", "achieved_tbps", "peak_tbps", "of_peak_tbps",
            "bound", "dominant_bytes")}, "findings": [f["code"] for f in entry["findings"]],
            "note": entry["efficiency_note"]})
    return rows


def forecast(config, layout, record: dict) -> dict | None:
    try:
        rate = fc.rate_from_results(layout)
    except fc.ForecastError:
        return None
    gpus, device = fc.engines_of(config)
    # This run's own time is forecast on the engines that generated at once in it (shards queued for a GPU or a
    # core ran one after another), so it compares with the time it took; the planning figure on the configured ones.
    at_once = min(record.get("dataset_shards_at_once") or gpus, gpus)
    output = rate["output_tokens_measured"]
    whole = fc.forecast(record["generated"] or 1, output, at_once, rate["tok_per_s_per_gpu"],
                        measured=rate["measured"], device=device)
    per = fc.forecast(PER, output, gpus, rate["tok_per_s_per_gpu"], measured=rate["measured"], device=device)
    # A CPU run measured no GPU: its rate is its CPU engines', under their own key, and the GPU key stays (null) so
    # that a reader of it never takes a CPU figure for a GPU's.
    per_engine = round(rate["tok_per_s_per_gpu"], 1)
    rates = {"tok_per_s_per_gpu": None, "tok_per_s_per_cpu_engine": per_engine} if device == "cpu" else \
        {"tok_per_s_per_gpu": per_engine}
    return {**rates, "output_tokens_per_prompt": round(output, 1), "gpus": gpus, "device": device,
            "this_run_engines": at_once, "this_run_forecast_s": whole["seconds"], "this_run_generation_wall_s":
            record["dataset_generation_wall_s"], f"hours_per_{PER}_prompts": per["hours"],
            "assumption": whole["assumption"]}


def storage(config, layout) -> dict:
    """The storage plan measured on this run's own files (so its dataset and exports are their sizes), with the
    sidecar, hidden states and prefill this dataset would cost; a model or GPU it cannot size says why."""
    from shardgen.report import storage_plan

    try:
        capture = Capture.sidecar_of(config)  # none: the sidecar planned as if all captured
        return storage_plan.plan(layout, Path(config.model.path), topk=capture.top_k if capture else storage_plan.TOPK,
                                 gpu=config.hardware.gpu, peak_overrides=config.hardware.peaks,
                                 captured=capture.sources if capture else None,
                                 hidden_capture=HiddenCapture.of(config))
    except ShardgenError as err:
        return {"note": f"no storage plan: {err}"}


def outlook(config, layout, done_files: list[Path], record: dict) -> dict:
    return {"efficiency": efficiency_rows(config, layout, done_files), "forecast": forecast(config, layout, record),
            "storage": storage(config, layout)}


def markdown(record: dict) -> str:
    lines = ["", "## efficiency", ""]
    for row in record["efficiency"]:
        if row.get("achieved_tflops") is None:
            lines.append(f"- shard {row['shard']}: {row['note']}")
        else:
            lines.append(f"- shard {row['shard']} ({row['gpu']}): {row['achieved_tflops']} of {row['peak_tflops']} "
                         f"TFLOP/s ({row['of_peak_tflops']:.1%}), {row['achieved_tbps']} of {row['peak_tbps']} TB/s "
                         f"({row['of_peak_tbps']:.1%}), {row['bound']}-bound, {row['dominant_bytes']} moves the most "
                         f"bytes; findings: {', '.join(row['findings']) or 'none'}")
    lines += ["", "## forecast", ""]
    if f := record["forecast"]:
        engine, engines = fc.engine_words(f)
        lines += [f"At {fc.engine_rate(f)} output tok/s per {engine} and {f['output_tokens_per_prompt']} output "
                  f"tokens per prompt: this run's prompts would take {f['this_run_forecast_s']} s at that rate "
                  f"throughout on the {f['this_run_engines']} {engine}(s) that generated at once in it (they took "
                  f"{f['this_run_generation_wall_s']} s, start-up and tail included); on {engines}, "
                  f"{f[f'hours_per_{PER}_prompts']} h per {PER:,} prompts.", "", f"Assumption: {f['assumption']}"]
        if f.get("device") == "cpu":
            lines += ["", "A CPU run's rate (the demo engine, gibberish at a few tokens per request) says nothing "
                          "about a GPU run: forecast a GPU job from an SGLang log (`shardgen forecast --log`)."]
    else:
        lines.append("no committed output tokens (no parts, or every request failed): no rate to forecast from")
    if plan := record.get("storage"):
        from shardgen.report.storage_plan import render

        lines += ["", "## storage plan", "", f"```\n{render(plan)}\n```"]
    return "\n".join(lines) + "\n"
