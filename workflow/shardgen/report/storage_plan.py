"""The storage and cost plan before the run: from the model's config.json, the prompt set (prompts.parquet) and a
pilot run's output lengths and files (else max_new_tokens and the formats), the size on disk of the dataset and
the exports, of a top-k sidecar at k, and of the hidden states an offline EAGLE-3 or DFlash drafter trains on, with
the GPU-hours of the prefill pass that would produce them. `shardgen forecast` prints it, the report keeps it in
summary.json (`storage`) and report.md."""

from pathlib import Path

from shardgen import ShardgenError
from shardgen.capture import Capture, HiddenCapture
from shardgen.engines.model_shape import ModelConfigError, ModelShape
from shardgen.layout import Layout
from shardgen.report import peaks, storage_hidden, storage_loads, storage_sizes

# the k of the sidecar when none is asked (issue 33's example; NeMo AutoModel found 64 keeps 0.92 of the mass)
TOPK = 20
TOPK_ENTRY_BYTES = 4 + 2  # int32 token id + float16 logprob
CHOSEN_BYTES = 2  # the chosen token's float16 logprob, kept even at k = 0
EAGLE3_LAYERS = 4  # three target layers (low, middle, high) + the last, as EAGLE-3 trains on
DFLASH_LAYERS = 5  # DFlash's draft config lists the target layers it reads: 5 in z-lab's released drafters
HIDDEN_DTYPES = {"bf16": 2, "fp8": 1}
PREFILL_FRACTION = 0.4  # of dense BF16 peak: long prefills reach 40-60% on H100/H200; the low end, for a budget
DEFAULT_GPU = "NVIDIA H100 80GB HBM3"  # when neither --gpu nor hardware.gpu names one
SECONDS_PER_HOUR = 3600


def pilot_layout(layout: Layout, pilot: Path | None) -> Layout | None:
    """The run whose output lengths and files are measured: --pilot, else this run once it is merged."""
    chosen = Layout(Path(pilot)) if pilot else layout
    return chosen if chosen.dataset.is_file() else None


def plan(layout: Layout, model_dir: Path, pilot: Path | None = None, topk: int = TOPK,
         dflash_layers: int = DFLASH_LAYERS, gpu: str | None = None, peak_overrides: dict | None = None,
         prefill_fraction: float = PREFILL_FRACTION, captured: frozenset[str] | None = None,
         hidden_capture: HiddenCapture | None = None) -> dict:
    """`captured`: the sources the sidecar would hold (None: every source); `hidden_capture`: the run's
    capture.hidden_states (None: off), planned at its layers and dtype and measured on its files."""
    measured_run = pilot_layout(layout, pilot)
    lengths = storage_loads.pilot_output_lengths(measured_run.dataset) if measured_run else {}
    per_source = storage_loads.planned_loads(layout.prompts, lengths)
    if measured_run:
        pilot_loads = storage_loads.pilot_loads(measured_run.dataset)
        per_source = storage_loads.calibrated(per_source, storage_loads.planned_loads(measured_run.prompts, lengths),
                                              pilot_loads)
        rates = storage_sizes.measured(measured_run, storage_loads.total(pilot_loads))
    else:
        rates = storage_sizes.from_format(layout.prompts)
    loads = storage_loads.total(per_source)
    sidecar_tokens = sum(load.output_tokens for source, load in per_source.items()
                         if captured is None or source in captured)
    sizes, rows = storage_sizes.sizes(rates, loads), storage_sizes.planned_rows(rates, loads)
    own = measured_run is not None and measured_run.root.resolve() == layout.root.resolve()
    if own:  # a merged run plans its own files: as they are on disk
        actual = storage_sizes.on_disk(layout)
        sizes, rows = {n: f["bytes"] for n, f in actual.items()}, {n: f["rows"] for n, f in actual.items()}
    files = [{"file": name, "rows": rows[name], "bytes": size,
              "bytes_per_token": round(rates[name]["bytes_per_token"], 3),
              "from": "this run's file" if own else rates[name]["from"]}
             for name, size in sizes.items()]
    sidecar = layout.export(storage_sizes.SIDECAR)
    this_run = ({"this_run": {"rows": storage_sizes.file_rows(sidecar), "bytes": sidecar.stat().st_size}}
                if own and sidecar.is_file() else {})
    shape = ModelShape.from_dir(model_dir)
    hidden = shape.get("hidden_size")
    gpu_assumed = gpu is None  # the default is a guess at the user's GPU, and the plan must say so
    gpu = gpu or DEFAULT_GPU
    peak = peaks.lookup(gpu, peak_overrides)
    active = shape.weights()[0]
    flops = 2 * active * loads.turn_tokens
    return {
        "plan": {"conversations": loads.conversations, "turns": loads.turns, "tokens": loads.turn_tokens,
                 "conversation_tokens": loads.conversation_tokens, "output_tokens": loads.output_tokens,
                 "per_source": {source: {"output_tokens_per_turn": round(lengths.get(source) or load.output_tokens
                                                                          / max(load.turns, 1), 1),
                                         "output_length_from": "pilot run's mean" if source in lengths else
                                         "max_new_tokens (nothing ran yet: an upper bound)",
                                         "conversations": load.conversations, "turns": load.turns,
                                         "tokens": load.turn_tokens}
                                for source, load in per_source.items()},
                 "pilot": str(measured_run.root) if measured_run else None,
                 "sizes_from": "the pilot run's files" if measured_run else "the formats (no pilot run)"},
        "files": files,
        "dataset_and_exports_bytes": sum(sizes.values()),
        "topk_sidecar": {"k": topk, "bytes_per_generated_token": CHOSEN_BYTES + topk * TOPK_ENTRY_BYTES,
                         "sources": "all" if captured is None else sorted(captured), "output_tokens": sidecar_tokens,
                         "bytes": sidecar_tokens * (CHOSEN_BYTES + topk * TOPK_ENTRY_BYTES), **this_run},
        "hidden_states": [{"drafter": drafter, "layers": layers, "hidden_size": hidden, "tokens": loads.turn_tokens,
                           **{f"{dtype}_bytes": layers * hidden * size * loads.turn_tokens
                              for dtype, size in HIDDEN_DTYPES.items()}}
                          for drafter, layers in (("EAGLE-3", EAGLE3_LAYERS), ("DFlash", dflash_layers))],
        "hidden_capture": storage_hidden.plan(hidden_capture, shape, per_source, layout) if hidden_capture else None,
        "prefill": {"gpu": gpu, "gpu_assumed": gpu_assumed, "peak_tflops": peak.tflops,
                    "fraction_of_peak": prefill_fraction, "active_params": active, "tokens": loads.turn_tokens,
                    "flops": flops,
                    "gpu_hours": flops / (peak.tflops * 1e12 * prefill_fraction) / SECONDS_PER_HOUR},
        "assumptions": [
            "hidden states and prefill cover every turns.jsonl row's tokens (prompt + output), as a trainer "
            "prefills each row; prefill FLOPs = 2 x active weights x tokens (attention's own FLOPs left out: "
            "they grow with context and are small beside the weights' at a few thousand tokens)",
            "the sidecar holds, per generated token, the chosen token's float16 logprob and k x (int32 id + "
            "float16 logprob), uncompressed (random ids and logprobs gain little from zstd)",
        ],
    }


def from_options(args, config, layout: Layout) -> dict | None:
    """`shardgen forecast`'s storage plan: None where there is no prompt set to plan from (no `prompts` run)."""
    model = args.model or (config.model.path if config else None)
    if not layout.prompts.is_file() or not model:
        return None
    hardware = config.hardware if config else None
    capture = Capture.sidecar_of(config) if config else None  # none: the sidecar planned as if all captured
    topk = args.topk if args.topk is not None else capture.top_k if capture else TOPK
    layers = DFLASH_LAYERS if args.dflash_layers is None else args.dflash_layers
    fraction = PREFILL_FRACTION if args.prefill_fraction is None else args.prefill_fraction
    if topk < 0 or layers < 1 or not 0 < fraction <= 1:
        raise ShardgenError(f"--topk must be >= 0, --dflash-layers >= 1 and --prefill-fraction in (0, 1] (got "
                            f"{topk}, {layers}, {fraction})")
    try:
        return plan(layout, Path(model), Path(args.pilot) if args.pilot else None, topk, layers,
                    args.gpu or (hardware.gpu if hardware else None), hardware.peaks if hardware else None, fraction,
                    capture.sources if capture else None, HiddenCapture.of(config) if config else None)
    except (ModelConfigError, peaks.UnknownGPU) as err:  # the time forecast still stands: say why, beside it
        return {"note": f"no storage plan: {err}"}


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} TiB"


def render(result: dict) -> str:
    if "note" in result:
        return result["note"]
    p = result["plan"]
    lines = [f"storage plan: {p['conversations']:,} conversations, {p['turns']:,} turns, {p['tokens']:,} tokens "
             f"({p['output_tokens']:,} generated); sizes from {p['sizes_from']}"
             + (f" ({p['pilot']})" if p["pilot"] else "")]
    lines += [f"  {source}: {s['turns']:,} turns, {s['output_tokens_per_turn']:,} output tokens per turn from "
              f"{s['output_length_from']}" for source, s in p["per_source"].items()]
    width = max(len(f["file"]) for f in result["files"])
    lines += ["", f"{'file'.ljust(width)}  {'rows':>12}  {'size':>12}  B/token  from"]
    lines += [f"{f['file'].ljust(width)}  {'-' if f['rows'] is None else format(f['rows'], ','):>12}  "
              f"{human(f['bytes']):>12}  {f['bytes_per_token']:7.2f}  {f['from']}" for f in result["files"]]
    lines.append(f"{'dataset + exports'.ljust(width)}  {'':>12}  {human(result['dataset_and_exports_bytes']):>12}")
    s = result["topk_sidecar"]
    over = "" if s["sources"] == "all" else f" (sources {', '.join(s['sources'])})"
    this_run = (f"; this run's file: {s['this_run']['rows']:,} rows, {human(s['this_run']['bytes'])}"
                if "this_run" in s else "")
    lines += ["", f"top-k sidecar at k = {s['k']}{over}: {s['bytes_per_generated_token']} B per generated token, "
                  f"{human(s['bytes'])}{this_run}", "", "hidden states (every token of every turn row):"]
    lines += [f"  {h['drafter']:8} {h['layers']} layers x {h['hidden_size']}: bf16 {human(h['bf16_bytes'])}, "
              f"fp8 {human(h['fp8_bytes'])}" for h in result["hidden_states"]]
    lines += storage_hidden.render(result.get("hidden_capture"), human)
    f = result["prefill"]
    assumed = " (an assumed default: --gpu or hardware.gpu names yours)" if f.get("gpu_assumed") else ""
    lines += [f"  prefill to produce them: {f['flops']:.3g} FLOPs = {f['gpu_hours']:.3g} GPU-hours on {f['gpu']}"
              f"{assumed} at {f['fraction_of_peak']:.0%} of {f['peak_tflops']} TFLOP/s"]
    lines += ["", *(f"assumption: {a}" for a in result["assumptions"])]
    return "\n".join(lines)
