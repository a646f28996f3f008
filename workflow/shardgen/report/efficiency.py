"""How close a run's decode came to the GPU: the roofline cost of each decode line's step (running requests at
their mean context) times the steps per second the line reports (gen throughput / running), against the GPU's
peaks. The bound is the roofline's: memory when the step's FLOPs per byte sit below the GPU's ridge point."""

from statistics import median
from typing import TypeGuard

from shardgen.engines import RunSettings
from shardgen.engines.model_shape import DTYPE_BYTES
from shardgen.report.peaks import UnknownGPU, lookup
from shardgen.report.roofline import Model

NEAR_PEAK = 0.8  # of the compute peak: compute_saturated


def context_tokens(row: dict, facts: dict) -> float | None:
    """Tokens in the KV cache for the row: the log's `#full token`, else usage x the pool (2-decimal usage)."""
    if row.get("full_tokens") is not None:
        return float(row["full_tokens"])
    pool = facts.get("max_total_num_tokens")
    return row["full_token_usage"] * pool if pool and row.get("full_token_usage") is not None else None


def decode_lines(rows: list[dict]) -> list[dict]:
    """Decode lines while requests waited (the steady part), else every decode line."""
    decode = [r for r in rows if r["kind"] == "decode" and r["running"] and r["gen_throughput"]]
    steady = [r for r in decode if r["queue"] > 0]
    return steady or decode


def efficiency(rows: list[dict], facts: dict, settings: RunSettings, model: Model, gpu: str | None,
               peaks: dict | None = None) -> dict:
    """The `efficiency` object; raises UnknownGPU (no peaks) for the caller to report."""
    peak = lookup(gpu, peaks)
    lines = decode_lines(rows)
    if not lines:
        raise ValueError("no decode lines to measure")
    types = model.dtypes(settings)
    size = {k: DTYPE_BYTES[v] for k, v in types.items()}
    flops, rates, parts = [], [], []
    for row in lines:
        context = (context_tokens(row, facts) or 0) / row["running"]
        step = model.decode_step(row["running"], context, size["weights"], size["kv"], size["ssm_state"])
        steps_per_s = row["gen_throughput"] / row["running"]
        flops.append(step["flops"] * steps_per_s)
        rates.append(sum(step["bytes"].values()) * steps_per_s)
        parts.append((step["bytes"], context))
    achieved_tflops, achieved_tbps = median(flops) / 1e12, median(rates) / 1e12
    middle = sorted(range(len(lines)), key=lambda i: rates[i])[len(lines) // 2]
    step_bytes, context = parts[middle]
    intensity, ridge = achieved_tflops / achieved_tbps, peak.tflops / peak.tbps
    return {
        "gpu": gpu, "peak_tflops": peak.tflops, "peak_tbps": peak.tbps, "peak_source": peak.source,
        "achieved_tflops": round(achieved_tflops, 2), "achieved_tbps": round(achieved_tbps, 3),
        "of_peak_tflops": round(achieved_tflops / peak.tflops, 3), "of_peak_tbps": round(achieved_tbps / peak.tbps, 3),
        "flops_per_byte": round(intensity, 1), "ridge_flops_per_byte": round(ridge, 1),
        "bound": "memory" if intensity < ridge else "compute",
        "of_roofline": round(achieved_tflops / min(peak.tflops, intensity * peak.tbps), 3),
        "bytes_per_step": {k: int(v) for k, v in step_bytes.items()},
        "dominant_bytes": max(step_bytes, key=step_bytes.get),
        "decode_tok_per_s": round(median(r["gen_throughput"] for r in lines), 1),
        "running": int(median(r["running"] for r in lines)), "mean_context": round(context, 1),
        "dtypes": types, "layers": model.pattern, "decode_lines": len(lines),
        "warning": ("above the GPU's peak: the model config or the GPU does not match the run"
                    if achieved_tflops > peak.tflops or achieved_tbps > peak.tbps else None),
        "basis": "median over decode lines while requests waited (else all decode lines); per step: weights read "
                 "once, KV read for the context and written for the new token, SSM+conv state read and written",
    }


def describe(rows, facts, settings, model_dir, gpu, peaks=None) -> tuple[dict | None, str | None]:
    """(efficiency, None), or (None, why not): no model, an unknown GPU, no decode lines."""
    if model_dir is None:
        return None, "no efficiency: the model is not known (pass --model MODEL_DIR)"
    try:
        return efficiency(rows, facts, settings, Model.from_dir(model_dir), gpu, peaks), None
    except (UnknownGPU, ValueError) as err:
        return None, f"no efficiency: {err}"


def near_compute_peak(eff: dict | None) -> TypeGuard[dict]:
    return bool(eff and not eff["warning"] and eff["of_peak_tflops"] >= NEAR_PEAK)
