"""The `shardgen` command: one subcommand per workflow step, plus status, query, reset and the analyses for users.

COMMANDS is the whole interface: each entry a stage's function, its help and its options. A command reads its
arguments, calls the function and prints what it returns; what to do lives in the stage."""

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from shardgen import ShardgenError
from shardgen.atomic import write_text
from shardgen.config import Config, ConfigError, complete_config, config_path, results_dir_of
from shardgen.layout import Layout, TuneLayout, shard_id


def _config(args) -> Config:
    """The whole config, validated as a workflow run validates it."""
    path = config_path(args.config)
    if path is None:
        raise ConfigError(f"shardgen {args.command} needs a config: --config FILE, $SHARDGEN_CONFIG (the workflow "
                          "sets it for its steps), or config/config.yaml in the current folder")
    return Config.from_file(path)


def _config_if_complete(args) -> Config | None:
    """The whole config where one is given and complete (an overlay with a few keys is not); a typo fails."""
    path = config_path(args.config)
    return complete_config(path) if path else None


def _results_dir(args) -> Path:
    """--results, else the `results_dir` of the config, else ./results: the read-only commands look where the
    user's config writes. A config given is validated even when --results names the folder."""
    path = config_path(args.config)
    results = results_dir_of(path) if path else Path("results")
    return Path(args.results) if args.results else results


def _table(rows: list[dict]) -> str:
    if not rows:
        return "(no rows)"
    cols = list(rows[0])
    cells = [["-" if r[c] is None else str(r[c]) for c in cols] for r in rows]  # no value: "-", never "None"
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    line = lambda values: "  ".join(v.rjust(w) for v, w in zip(values, widths))  # noqa: E731
    return "\n".join([line(cols), line(["-" * w for w in widths])] + [line(row) for row in cells])


class Interrupted(KeyboardInterrupt):
    """Ctrl-C: said in one line (what was kept), not as a traceback."""


def cmd_demo_model(args):
    from shardgen.demo_model import build

    build(Path(args.out), Path(args.corpus), seed=args.seed)


def cmd_prompts(args):
    from shardgen.prompts.stage import build_prompts

    print(json.dumps(build_prompts(_config(args), Path(args.out), workers=args.workers), indent=1))


def cmd_split(args):
    from shardgen.prompts.split import split

    config = _config(args)
    prompts = Path(args.prompts) if args.prompts else Layout(config.results).prompts
    loads = split(prompts, Path(args.out), config.n_shards)
    print(json.dumps({"expected_tokens_per_shard": loads}))


def cmd_generate(args):
    from shardgen.generate.checkpoint import part_files
    from shardgen.generate.shard import generate_shard

    config = _config(args)
    try:
        record = generate_shard(config, args.shard, Path(args.done))
    except KeyboardInterrupt:
        kept = len(part_files(Layout(config.results).shard_dir(args.shard)))
        raise Interrupted(f"shard {shard_id(args.shard)} interrupted: {kept} parts kept, a rerun resumes") from None
    print(json.dumps({k: v for k, v in record.items() if k != "attempts"}, default=str))


def cmd_retry(args):
    from shardgen.generate.retry import retry_failed

    summary = retry_failed(_config(args), args.shards, args.limit)
    print(json.dumps(summary))
    if args.out:
        write_text(json.dumps(summary, indent=1), Path(args.out))


def cmd_merge(args):
    from shardgen.merge.stage import run

    config = _config(args)
    layout = Layout(config.results)
    prompts = Path(args.prompts) if args.prompts else layout.prompts
    sources = Path(args.sources) if args.sources else layout.prompt_table("sources")
    print(json.dumps(run(config, prompts, sources, Path(args.dataset), Path(args.train), Path(args.failed))))


def cmd_report(args):
    from shardgen.report.summary import report

    record = report(_config(args), [Path(p) for p in args.outputs], [Path(p) for p in args.done], Path(args.out))
    print(json.dumps({k: v for k, v in record.items() if not isinstance(v, list)}, indent=1))


def cmd_query(args):
    from shardgen import db

    results = _results_dir(args)
    if args.list or not args.name:
        width = max(map(len, db.user_queries()))
        print("\n".join(f"{name.ljust(width)}  {purpose}" for name, purpose in db.user_queries().items()))
        return
    if db.is_internal(args.name):
        raise ShardgenError(f"{args.name!r} is one of the workflow steps' own queries (it needs their parameters), not "
                            f"a user query; `shardgen query --list` shows those")
    from shardgen.generate import checkpoint

    print(_table(db.query(checkpoint.connect(Layout(results)), args.name)))


def cmd_diagnose(args):
    from shardgen.report.diagnose import render, run

    result = run([Path(p) for p in args.paths], Layout(_results_dir(args)), _config_if_complete(args), args.model,
                 args.gpu)
    print(json.dumps(result, indent=1) if args.json else render(result))


def cmd_tune(args):
    from shardgen.tune import tune

    config = _config(args)
    options = {"sample": args.sample, "seed": config.seed if args.seed is None else args.seed,
               "max_new_tokens": args.max_new_tokens, "ignore_eos": args.ignore_eos, "caps": args.caps,
               "bf16_state": not args.keep_state_dtype}
    out = Path(args.out) if args.out else Layout(config.results).tune_dir
    summary = tune(config, out, options, args.settings, args.count, args.allow_numerics_change)
    print(_table(summary["ranking"]))
    if summary["pending"]:
        print(f"{summary['measured']} of {summary['settings']} settings measured; run the same command again for "
              f"the next ({', '.join(summary['pending'])})")
    if summary["best"]:
        gains = summary.get("best_over_current") or {}
        versus = (f" (x{gains['steady_decode_tps']} steady decode, x{gains['output_tps']} whole run over the current "
                  "settings)" if gains else "")
        print(f"best so far: {summary['best']}{versus}; fragment: {TuneLayout(out).best}")


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
    from shardgen.report import forecast as fc, storage_plan

    config, layout = _config_if_complete(args), Layout(_results_dir(args))
    storage = storage_plan.from_options(args, config, layout)
    try:
        result = fc.from_options(args, config, layout)
    except fc.ForecastError as err:
        if storage is None:
            raise
        result = {"time": f"no time forecast: {err}"}  # before any run the storage plan stands alone
    if storage is not None:
        result["storage"] = storage
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(result["time"] if "time" in result else fc.render(result))
        print("" if storage is None else "\n" + storage_plan.render(storage))


def cmd_reset(args):
    from shardgen.generate.reset import rerun_hint, reset_shard

    layout = Layout(_results_dir(args))
    moved = reset_shard(layout, args.shard)
    print(f"shard {args.shard}: parts moved to {moved}" if moved else f"shard {args.shard}: no parts to move")
    print(rerun_hint(layout, args.shard, config_path(args.config), given_results=bool(args.results)))


def _int_list(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def opt(*flags, **kwargs) -> tuple[tuple, dict]:
    """One argument of a command, as argparse's add_argument takes it."""
    return flags, kwargs


@dataclass(frozen=True)
class Command:
    run: Callable[[argparse.Namespace], None]
    help: str
    options: tuple = field(default=())


COMMANDS = {
    "demo-model": Command(cmd_demo_model, "build the demo's tiny NemotronH model", (
        opt("--out", required=True), opt("--corpus", required=True), opt("--seed", type=int, default=0))),
    "prompts": Command(cmd_prompts, "normalize, tokenize, dedupe, reject", (
        opt("--out", required=True),
        opt("--workers", type=int, help="processes (default: the config's prompts.workers, else every core)"))),
    "split": Command(cmd_split, "length-balanced shards", (
        opt("--out", required=True), opt("--prompts", help="the prompt set (default: the config's results')"))),
    "generate": Command(cmd_generate, "generate one shard (resumes from committed parts)", (
        opt("--shard", type=int, required=True), opt("--done", required=True))),
    "retry": Command(cmd_retry, "generate the failed prompts again (up to --limit failures each)", (
        opt("--shards", type=int, nargs="*", help="shard numbers (default: every shard with failures)"),
        opt("--limit", type=int, help="give up on a prompt after this many failures (default 3)"),
        opt("--out", help="write what was retried here (the workflow's retry rule)"))),
    "merge": Command(cmd_merge, "final dataset and training export", (
        opt("--dataset", required=True), opt("--train", required=True), opt("--failed", required=True),
        opt("--prompts", help="the prompt set merged (default: the config's results')"),
        opt("--sources", help="the prompt set's sources table (default: the config's results')"))),
    "report": Command(cmd_report, "the summary, manifest, markdown report and figures", (
        opt("--out", required=True), opt("--outputs", nargs="+", required=True),
        opt("--done", nargs="+", required=True))),
    "query": Command(cmd_query, "run a named DuckDB query over the results (--list: each with its purpose)", (
        opt("name", nargs="?", help="the query (see --list)"),
        opt("--list", action="store_true", help="list the queries with their purpose"))),
    "diagnose": Command(cmd_diagnose, "what limits throughput, from SGLang logs or shard telemetry", (
        opt("paths", nargs="*", help="SGLang log files or shard folders of a run (default: every shard with "
                                     "SGLang telemetry)"),
        opt("--json", action="store_true"),
        opt("--model", help="model folder (its config.json) for the efficiency (default: the config's model)"),
        opt("--gpu", help='GPU name as nvidia-smi reports it, e.g. "NVIDIA H200" (default: the run\'s, else '
                          "hardware.gpu)"))),
    "tune": Command(cmd_tune, "measure hybrid-Mamba settings on a prompt sample, one fresh engine per setting", (
        opt("--sample", type=int, default=2000, help="prompts sampled from the prompt set (default 2000)"),
        opt("--seed", type=int, default=None, help="sample seed (default: the config's seed)"),
        opt("--max-new-tokens", type=int, default=None, help="cap every request's output (default: the prompts')"),
        opt("--ignore-eos", action="store_true", help="always generate max-new-tokens (dummy-weight models)"),
        opt("--caps", type=_int_list, default=[512, 1024], help="no_radix caps to try (default 512,1024)"),
        opt("--keep-state-dtype", action="store_true", help="no bfloat16-SSM-state setting in the grid"),
        opt("--allow-numerics-change", action="store_true",
            help="may recommend a setting that changes the model's numerics (bfloat16 SSM state, fp8 KV)"),
        opt("--settings", type=lambda s: s.split(","), help="measure only these settings (comma-separated)"),
        opt("--count", type=int, default=1, help="settings to measure in this call (default 1; 0 = all)"),
        opt("--out", help="tune folder (default: <results_dir>/tune)"))),
    "status": Command(cmd_status, "progress of every shard", (
        opt("--watch", type=float, nargs="?", const=5.0, default=None, help="refresh every N seconds"),)),
    "forecast": Command(cmd_forecast, "time, disk and prefill cost of a planned dataset (README: Forecast)", (
        opt("--prompts", type=int, help="prompts (default: the built prompt set of --config/--results)"),
        opt("--output-tokens", type=float, help="mean output tokens per prompt (default: the run's measured)"),
        opt("--gpus", type=int, help="GPUs, one engine each (default: the config's gpus / GPUs per engine)"),
        opt("--tok-per-s", type=float, help="output tok/s per GPU (default: --log, else the run's own)"),
        opt("--req-per-s", type=float, help="whole-run requests/s instead of a per-GPU token rate"),
        opt("--log", help="an SGLang log: its decode lines' gen throughput is the per-GPU rate"),
        opt("--pilot", help="a finished run's results folder to measure output lengths and bytes per token from "
                            "(default: this run's, once merged; none: max_new_tokens and the formats)"),
        opt("--topk", type=int, help="k of the top-k sidecar to size (default 20)"),
        opt("--dflash-layers", type=int, help="target layers a DFlash draft reads (default 5)"),
        opt("--prefill-fraction", type=float, help="prefill's share of the GPU's dense BF16 peak "
                                                                "(default 0.4)"),
        opt("--model", help="model folder (its config.json; default: the config's model)"),
        opt("--gpu", help="GPU of the prefill (default: hardware.gpu, else NVIDIA H100 80GB HBM3)"),
        opt("--json", action="store_true"))),
    "reset": Command(cmd_reset, "start a shard over (parts moved aside)", (opt("shard", type=int),)),
}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="shardgen", description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", help="results directory (default: the config's results_dir, else results)")
    ap.add_argument("--config", help="config file (default: $SHARDGEN_CONFIG, which the workflow sets for its steps, "
                                     "else config/config.yaml as `snakemake` reads it)")
    sub = ap.add_subparsers(dest="command", required=True)
    for name, command in COMMANDS.items():
        p = sub.add_parser(name, help=command.help)
        p.set_defaults(func=command.run)
        for flags, kwargs in command.options:
            p.add_argument(*flags, **kwargs)
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
