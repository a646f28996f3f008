"""What `shardgen tune` measured: the ranking (steady decode tok/s first), the gain over the user's current settings,
and the best setting as a config fragment (`snakemake --configfile config/config.yaml results/tune/best.yaml`)."""

import json
from pathlib import Path

import yaml

from shardgen.atomic import write_text
from shardgen.engines.sglang_args import GRAPH_LIMIT_FIELDS, STRATEGY_FIELDS
from shardgen.report.summary import markdown_table

COLUMNS = ("setting", "status", "steady_decode_tps", "output_tps", "running_max", "mamba_usage_max", "kv_usage_max",
           "eager_decode_lines", "engine_start_s")
FRAGMENT_KEYS = ("mamba_strategy", "max_running_requests", "mem_fraction_static")


def load_results(tune_dir: Path, plan: dict) -> list[dict]:
    paths = (tune_dir / name / "result.json" for name in plan["settings"])
    return [json.loads(p.read_text()) for p in paths if p.exists()]


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


def summarize(tune_dir: Path, plan: dict) -> dict:
    ranked = rank(load_results(tune_dir, plan))
    best = next((r for r in ranked if r["status"] == "ok"), None)
    current = next((r for r in ranked if r["setting"] == "current" and r["status"] == "ok"), None)
    summary = {"measured": len(ranked), "settings": len(plan["settings"]), "sample_rows": plan["sample_rows"],
               "max_new_tokens": plan["max_new_tokens"], "ignore_eos": plan["ignore_eos"],
               "best": best["setting"] if best else None,
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
    resolved = best["engine"].get("resolved", {})
    args = dict(engine["args"])
    for key in current_args.keys() - args.keys():
        family = next((f for f in (STRATEGY_FIELDS, GRAPH_LIMIT_FIELDS) if key in f), (key,))
        args[key] = next((resolved[k] for k in family if k in resolved), None)
    gains = summary.get("best_over_current") or {}
    lines = [f"# shardgen tune: best of {summary['measured']} of {summary['settings']} settings, on "
             f"{summary['sample_rows']} sampled prompts: `{best['setting']}`",
             f"# steady decode {best.get('steady_decode_tps')} tok/s, whole run {best.get('output_tps')} tok/s, "
             f"running up to {best.get('running_max')}",
             f"# vs the current settings: steady decode x{gains.get('steady_decode_tps')}, whole run "
             f"x{gains.get('output_tps')}" if gains else "# the current settings were not measured",
             "# use: snakemake --configfile config/config.yaml <this file>"]
    if args.get("mamba_ssm_dtype") == "bfloat16":
        lines.append("# note: bfloat16 SSM state halves its memory; SGLang calls float32 the more accurate choice")
    body = {"engine": {**{k: engine[k] for k in FRAGMENT_KEYS}, "args": args}}
    return "\n".join(lines) + "\n" + yaml.safe_dump(body, sort_keys=False)


def write(tune_dir: Path, plan: dict) -> dict:
    """tune.json, ranking.md and, once a setting has run, best.yaml."""
    summary = summarize(tune_dir, plan)
    write_text(json.dumps(summary, indent=1), tune_dir / "tune.json")
    write_text("\n".join(markdown_table(summary["ranking"])) + "\n", tune_dir / "ranking.md")
    if summary["best"]:
        best = json.loads((tune_dir / summary["best"] / "result.json").read_text())
        write_text(fragment(plan, best, summary), tune_dir / "best.yaml")
    return summary
