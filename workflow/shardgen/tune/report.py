"""What `shardgen tune` measured: the ranking (steady decode tok/s first), the gain over the user's current settings,
and the best setting as a config fragment (`snakemake --configfile config/config.yaml results/tune/best.yaml`).

A setting that changes the model's numerics (its backend's `numerics_changes`: a bfloat16 SSM state where the model
keeps float32, an fp8 KV cache) is measured and marked in the ranking, but never recommended unless the call allows
it: the generated data would not be what the model as served generates."""

import json
from pathlib import Path

import yaml

from shardgen.store.atomic import write_text
from shardgen.engines.registry import backend
from shardgen.layout import TuneLayout
from shardgen.report.summary import markdown_table

COLUMNS = ("setting", "status", "steady_decode_tps", "output_tps", "running_max", "mamba_usage_max", "kv_usage_max",
           "eager_decode_lines", "engine_start_s", "numerics_change")
FRAGMENT_KEYS = ("memory_share", "max_running_requests")  # with the backend's own section and engine.args


def load_results(tune_dir: Path, plan: dict) -> list[dict]:
    """Each measured setting's result, with `numerics_change`: what in it changes the model's numerics (None:
    nothing)."""
    model_path = plan["config"]["model"]["path"]
    results = []
    for name, engine in plan["settings"].items():
        if (path := TuneLayout(tune_dir).result(name)).exists():
            changes = backend(engine["backend"]).numerics_changes(engine, model_path)
            results.append({**json.loads(path.read_text()), "numerics_change": "; ".join(changes) or None})
    return results


def rank(results: list[dict]) -> list[dict]:
    """Measured settings by steady decode tok/s, then whole-run tok/s; unsaturated ones after, failed ones last."""
    def key(r):
        return (r["status"] != "ok", r.get("steady_decode_tps") is None, -(r.get("steady_decode_tps") or 0),
                -(r.get("output_tps") or 0))
    return sorted(results, key=key)


def _ratio(best: dict, current: dict, metric: str) -> float | None:
    if best.get(metric) and current.get(metric):
        return round(best[metric] / current[metric], 3)
    return None


def summarize(tune_dir: Path, plan: dict, allow_numerics_change: bool = False) -> dict:
    ranked = rank(load_results(tune_dir, plan))
    best = next((r for r in ranked if r["status"] == "ok" and (allow_numerics_change or not r["numerics_change"])),
                None)
    current = next((r for r in ranked if r["setting"] == "current" and r["status"] == "ok"), None)
    summary = {"measured": len(ranked), "settings": len(plan["settings"]), "sample_rows": plan["sample_rows"],
               "max_new_tokens": plan["max_new_tokens"], "ignore_eos": plan["ignore_eos"],
               "best": best["setting"] if best else None, "allow_numerics_change": allow_numerics_change,
               "ranking": [{c: r.get(c) for c in COLUMNS} for r in ranked],
               "pending": [n for n in plan["settings"] if n not in {r["setting"] for r in ranked}]}
    if best and current:
        summary["best_over_current"] = {m: _ratio(best, current, m) for m in ("steady_decode_tps", "output_tps")}
    return summary


def fragment(plan: dict, best: dict, summary: dict) -> str:
    """The winning engine settings. Snakemake merges config files key by key, so a memory-layout argument the user
    set but the winner did not is written with the value the winning engine ran with."""
    engine = plan["settings"][best["setting"]]
    current_args = plan["config"]["engine"]["args"]
    chosen = backend(engine["backend"])
    assert hasattr(chosen, "ran_with")  # a Tunable backend: plan.grid refuses the rest before anything is measured
    ran_with = chosen.ran_with
    args = dict(engine["args"])
    for key in current_args.keys() - args.keys():
        args[key] = ran_with(best["engine"], key)
    gains = summary.get("best_over_current") or {}
    lines = [f"# shardgen tune: best of {summary['measured']} of {summary['settings']} settings, on "
             f"{summary['sample_rows']} sampled prompts: `{best['setting']}`",
             f"# steady decode {best.get('steady_decode_tps')} tok/s, whole run {best.get('output_tps')} tok/s, "
             f"running up to {best.get('running_max')}",
             f"# vs the current settings: steady decode x{gains.get('steady_decode_tps')}, whole run "
             f"x{gains.get('output_tps')}" if gains else "# the current settings were not measured",
             "# use: snakemake --configfile config/config.yaml <this file>"]
    if best["numerics_change"]:
        lines.append(f"# changes the model's numerics (allowed by --allow-numerics-change): {best['numerics_change']}")
    own = {name: engine[name] for name in (engine["backend"],) if name in engine}  # engine.<backend>, if it has one
    body = {"engine": {**{k: engine[k] for k in FRAGMENT_KEYS}, **own, "args": args}}
    return "\n".join(lines) + "\n" + yaml.safe_dump(body, sort_keys=False)


def write(tune_dir: Path, plan: dict, allow_numerics_change: bool = False) -> dict:
    """tune.json, ranking.md and, once a setting that may be recommended has run, best.yaml."""
    tune = TuneLayout(tune_dir)
    summary = summarize(tune_dir, plan, allow_numerics_change)
    write_text(json.dumps(summary, indent=1), tune.summary)
    write_text("\n".join(markdown_table(summary["ranking"])) + "\n", tune.ranking)
    if summary["best"]:
        best = next(r for r in load_results(tune_dir, plan) if r["setting"] == summary["best"])
        write_text(fragment(plan, best, summary), tune.best)
    else:  # a fragment an earlier call wrote (say, allowing a numerics change) is not this call's recommendation
        tune.best.unlink(missing_ok=True)
    return summary
