"""The `shardgen` command: one subcommand per workflow step, plus status, query and reset for users."""

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

from shardgen import ShardgenError
from shardgen.atomic import write_text
from shardgen.config import CONFIG_ENV, Config, ConfigError, results_dir_of
from shardgen.layout import Layout, shard_id


def _config(args) -> Config:
    path = args.config or os.environ.get(CONFIG_ENV)
    if not path:
        raise ConfigError(f"shardgen {args.command} needs --config or SHARDGEN_CONFIG (the workflow sets it)")
    return Config.from_file(path)


def _results_dir(args) -> Path:
    """--results, else the `results_dir` of --config (or $SHARDGEN_CONFIG), else ./results: the read-only commands
    must look where the user's config writes."""
    if args.results:
        return Path(args.results)
    path = args.config or os.environ.get(CONFIG_ENV)
    return results_dir_of(Path(path)) if path else Path("results")


def cmd_demo_model(args):
    from shardgen.demo_model import build

    build(Path(args.out), Path(args.corpus), seed=args.seed)


def cmd_prompts(args):
    from shardgen.prompts.stage import build_prompts

    counts = build_prompts(_config(args), Path(args.out), workers=args.workers)
    print(json.dumps(counts, indent=1))


def cmd_split(args):
    from shardgen.prompts.split import split

    config = _config(args)
    loads = split(Layout(config.results).prompts, Path(args.out), config.n_shards)
    print(json.dumps({"expected_tokens_per_shard": loads}))


class Interrupted(KeyboardInterrupt):
    """Ctrl-C: said in one line (what was kept), not as a traceback."""


def cmd_generate(args):
    from shardgen.generate.shard import generate_shard
    from shardgen.generate.checkpoint import part_files

    config = _config(args)
    try:
        record = generate_shard(config, args.shard, Path(args.done))
    except KeyboardInterrupt:
        kept = len(part_files(Layout(config.results).shard_dir(args.shard)))
        raise Interrupted(f"shard {shard_id(args.shard)} interrupted: {kept} parts kept, a rerun resumes") from None
    print(json.dumps({k: v for k, v in record.items() if k != "attempts"}, default=str))


def cmd_retry(args):
    """Generate again the failed prompts of every shard (or those named) that failed fewer than --limit times;
    rewrite their done files so merge and report run again."""
    from shardgen.generate.shard import generate_shard

    config = _config(args)
    layout = Layout(config.results)
    shards = args.shards or layout.split_shards()
    summary = {}
    for shard in shards:
        done = layout.done(shard)
        if done.exists() and json.loads(done.read_text())["failed"] == 0:
            continue
        record = generate_shard(config, shard, done, retry_limit=args.limit)
        summary[shard] = {"generated": record["generated"], "failed": record["failed"]}
    print(json.dumps({"retried_shards": summary}))
    if args.out:
        write_text(json.dumps({"retried_shards": summary}, indent=1), Path(args.out))


def cmd_merge(args):
    from shardgen.merge.freshness import check_prompt_set
    from shardgen.merge.exports import write_manifest
    from shardgen.merge.dataset import merge

    config = _config(args)
    layout = Layout(config.results)
    check_prompt_set(config, layout.prompts_dir)
    record = merge(layout, Path(args.dataset), Path(args.train), Path(args.failed))
    write_manifest(config, layout)
    print(json.dumps(record))


def cmd_report(args):
    from shardgen.report.summary import report

    record = report(_config(args), [Path(p) for p in args.outputs], [Path(p) for p in args.done], Path(args.out))
    print(json.dumps({k: v for k, v in record.items() if not isinstance(v, list)}, indent=1))


def _table(rows: list[dict]) -> str:
    if not rows:
        return "(no rows)"
    cols = list(rows[0])
    cells = [["-" if r[c] is None else str(r[c]) for c in cols] for r in rows]  # no value: "-", never "None"
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    line = lambda values: "  ".join(v.rjust(w) for v, w in zip(values, widths))  # noqa: E731
    return "\n".join([line(cols), line(["-" * w for w in widths])] + [line(row) for row in cells])


def cmd_query(args):
    from shardgen import db

    if args.list or not args.name:
        width = max(map(len, db.user_queries()))
        print("\n".join(f"{name.ljust(width)}  {purpose}" for name, purpose in db.user_queries().items()))
        return
    if db.is_internal(args.name):
        raise ShardgenError(f"{args.name!r} is one of the workflow steps' own queries (it needs their parameters), not "
                            f"a user query; `shardgen query --list` shows those")
    con = db.connect(Layout(_results_dir(args)))
    db.define_views(con, "winners", "accounting", "per_shard", "throughput")
    print(_table(db.query(con, args.name)))


def _full_config(args) -> Config | None:
    """The whole config where one is given and complete (an overlay with just results_dir is not)."""
    try:
        return _config(args) if args.config or os.environ.get(CONFIG_ENV) else None
    except ConfigError:
        return None


def _hardware(args) -> tuple[Path | None, str | None, dict, str | None]:
    """Model folder, --gpu, peak overrides and the fallback GPU name: the options, else the config."""
    config = _full_config(args)
    model = args.model or (config.model.path if config else None)
    peaks, gpu = (config.hardware.peaks, config.hardware.gpu) if config else ({}, None)
    return (Path(model) if model else None), args.gpu, peaks, gpu


def cmd_diagnose(args):
    from shardgen.report.diagnose import render, report

    layout = Layout(_results_dir(args))
    paths = [Path(p) for p in args.paths] or layout.shards_with_telemetry()
    if not paths:
        raise ConfigError(f"nothing to diagnose: give SGLang log files or shard folders (none with telemetry in "
                          f"{layout.generate_dir})")
    result = report(paths, *_hardware(args))
    print(json.dumps(result, indent=1) if args.json else render(result))


def cmd_tune(args):
    from shardgen.tune import tune

    config = _config(args)
    options = {"sample": args.sample, "seed": config.seed if args.seed is None else args.seed,
               "max_new_tokens": args.max_new_tokens, "ignore_eos": args.ignore_eos, "caps": args.caps,
               "bf16_state": not args.keep_state_dtype}
    out = Path(args.out) if args.out else Layout(config.results).tune_dir
    summary = tune(config, out, options, args.settings, args.count)
    print(_table(summary["ranking"]))
    if summary["pending"]:
        print(f"{summary['measured']} of {summary['settings']} settings measured; run the same command again for "
              f"the next ({', '.join(summary['pending'])})")
    if summary["best"]:
        gains = summary.get("best_over_current") or {}
        versus = (f" (x{gains['steady_decode_tps']} steady decode, x{gains['output_tps']} whole run over the current "
                  "settings)" if gains else "")
        print(f"best so far: {summary['best']}{versus}; fragment: {out / 'best.yaml'}")


def cmd_status(args):
    from shardgen.report import eta
    from shardgen.report.status import status

    layout = Layout(_results_dir(args))
    while True:
        rows = status(layout)
        run = eta.annotate(layout, rows)
        print(_table(rows) + "\n" + eta.render(run), flush=True)
        if not args.watch:
            return
        time.sleep(args.watch)
        print()


def cmd_forecast(args):
    from shardgen.report import forecast as fc

    result = fc.from_options(args, _full_config(args), Layout(_results_dir(args)))
    print(json.dumps(result, indent=1) if args.json else fc.render(result))


def cmd_reset(args):
    from shardgen.generate.reset import reset_shard

    layout = Layout(_results_dir(args))
    moved = reset_shard(layout, args.shard)
    print(f"shard {args.shard}: parts moved to {moved}" if moved else f"shard {args.shard}: no parts to move")
    print(f"now run: snakemake -R {layout.done(args.shard)}")


def _int_list(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="shardgen", description=__doc__)
    ap.add_argument("--results", help="results directory (default: the config's results_dir, else results)")
    ap.add_argument("--config", help="config file (default: $SHARDGEN_CONFIG, which the workflow sets for its steps)")
    sub = ap.add_subparsers(dest="command", required=True)

    def add(name, func, help_text):
        p = sub.add_parser(name, help=help_text)
        p.set_defaults(func=func)
        return p

    p = add("demo-model", cmd_demo_model, "build the demo's tiny NemotronH model")
    p.add_argument("--out", required=True)
    p.add_argument("--corpus", required=True)
    p.add_argument("--seed", type=int, default=0)
    p = add("prompts", cmd_prompts, "normalize, tokenize, dedupe, reject")
    p.add_argument("--out", required=True)
    p.add_argument("--workers", type=int, help="processes (default: the config's prompts.workers, else every core)")
    add("split", cmd_split, "length-balanced shards").add_argument("--out", required=True)
    p = add("generate", cmd_generate, "generate one shard (resumes from committed parts)")
    p.add_argument("--shard", type=int, required=True)
    p.add_argument("--done", required=True)
    p = add("retry", cmd_retry, "generate the failed prompts again (up to --limit failures each)")
    p.add_argument("--shards", type=int, nargs="*", help="shard numbers (default: every shard with failures)")
    p.add_argument("--limit", type=int, default=3, help="give up on a prompt after this many failures")
    p.add_argument("--out", help="write what was retried here (the workflow's retry rule)")
    p = add("merge", cmd_merge, "final dataset and training export")
    p.add_argument("--dataset", required=True)
    p.add_argument("--train", required=True)
    p.add_argument("--failed", required=True)
    p = add("report", cmd_report, "summary, manifest and report.md")
    p.add_argument("--out", required=True)
    p.add_argument("--outputs", nargs="+", required=True)
    p.add_argument("--done", nargs="+", required=True)
    p = add("query", cmd_query, "run a named DuckDB query over the results (--list: each with its purpose)")
    p.add_argument("name", nargs="?", help="the query (see --list)")
    p.add_argument("--list", action="store_true", help="list the queries with their purpose")
    p = add("diagnose", cmd_diagnose, "what limits throughput, from SGLang logs or shard telemetry")
    p.add_argument("paths", nargs="*", help="SGLang log files or generate/shard-NNN folders (default: every shard)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--model", help="model folder (its config.json) for the efficiency (default: the config's model)")
    p.add_argument("--gpu", help='GPU name as nvidia-smi reports it, e.g. "NVIDIA H200" (default: the run\'s, '
                   "else hardware.gpu)")
    p = add("tune", cmd_tune, "measure hybrid-Mamba settings on a prompt sample, one fresh engine per setting")
    p.add_argument("--sample", type=int, default=2000, help="prompts sampled from the prompt set (default 2000)")
    p.add_argument("--seed", type=int, default=None, help="sample seed (default: the config's seed)")
    p.add_argument("--max-new-tokens", type=int, default=None, help="cap every request's output (default: the prompts')")
    p.add_argument("--ignore-eos", action="store_true", help="always generate max-new-tokens (dummy-weight models)")
    p.add_argument("--caps", type=_int_list, default=[512, 1024], help="no_radix caps to try (default 512,1024)")
    p.add_argument("--keep-state-dtype", action="store_true", help="no bfloat16-SSM-state setting in the grid")
    p.add_argument("--settings", type=lambda s: s.split(","), help="measure only these settings (comma-separated)")
    p.add_argument("--count", type=int, default=1, help="settings to measure in this call (default 1; 0 = all)")
    p.add_argument("--out", help="tune folder (default: <results_dir>/tune)")
    add("status", cmd_status, "progress of every shard").add_argument(
        "--watch", type=float, nargs="?", const=5.0, default=None, help="refresh every N seconds")
    p = add("forecast", cmd_forecast, "time to the dataset for a planned job, from a measured rate")
    p.add_argument("--prompts", type=int, help="prompts (default: the built prompt set of --config/--results)")
    p.add_argument("--output-tokens", type=float, help="mean output tokens per prompt (default: the run's measured)")
    p.add_argument("--gpus", type=int, help="GPUs, one engine each (default: the config's gpus / tp_size)")
    p.add_argument("--tok-per-s", type=float, help="output tok/s per GPU (default: --log, else the run's own)")
    p.add_argument("--req-per-s", type=float, help="whole-run requests/s instead of a per-GPU token rate")
    p.add_argument("--log", help="an SGLang log: its decode lines' gen throughput is the per-GPU rate")
    p.add_argument("--json", action="store_true")
    add("reset", cmd_reset, "start a shard over (parts moved aside)").add_argument("shard", type=int)
    return ap


def _quiet_stdout() -> None:
    """The reader went away (`shardgen query dataset | head`): point stdout at /dev/null so the interpreter's
    final flush does not raise again."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    # Sources and models are read from local folders or the local HF cache only: a name that is not there fails at
    # once instead of retrying the hub for half a minute (users may still set these to 0).
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    args = parser().parse_args(argv)
    log = logging.getLogger("shardgen")
    try:
        args.func(args)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at exit
    except Interrupted as err:
        log.warning("%s", err)
        return 130
    except KeyboardInterrupt:
        log.warning("shardgen %s interrupted", args.command)
        return 130
    except BrokenPipeError:
        _quiet_stdout()
        return 141
    except ShardgenError as err:
        log.error("%s", err)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
