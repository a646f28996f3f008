"""The `shardgen` command: one subcommand per workflow step, plus status, query, reset and the analyses for users.

COMMANDS is the whole interface: each entry a stage's function, its help and its options. A command reads its
arguments, calls the function and prints what it returns; what to do lives in the stage."""

import argparse
import logging
import os
import sys
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

from shardgen import ShardgenError
from shardgen.commands import (Interrupted, cmd_audit, cmd_demo_model, cmd_diagnose, cmd_export_hidden, cmd_forecast,
                               cmd_generate, cmd_merge, cmd_prompts, cmd_query, cmd_reset, cmd_retry, cmd_report,
                               cmd_split, cmd_status, cmd_tune)
from shardgen.merge.hidden_exports import TRAINERS


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
        opt("--workers", type=int, help="processes (default: the config's prompts.workers, else every core)"),
        opt("--log", dest="output_log", help="the stage's output goes to this file; the console keeps one line per "
                                              "source that lost rows"))),
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
    "export-hidden": Command(cmd_export_hidden, "one trainer's hidden-state export, made from the merged dataset's "
                                                "parts (docs/trainers.md)", (
        opt("--trainer", required=True, choices=TRAINERS,
            help="specforge (EAGLE-3), specforge_dflash (DFlash) or speculators (EAGLE-3 and DFlash)"),
        opt("--out", help="the export's folder, replaced whole (default: <results_dir>/exports/hidden/<trainer>)"))),
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
    "audit": Command(cmd_audit, "re-score a sample of generated turns prefill-only under the run's engine settings "
                                "and others: argmax and top-k agreement, logprob drift", (
        opt("--sample", type=int, default=200, help="turns sampled from the current generated ones (default 200)"),
        opt("--seed", type=int, default=None, help="sample seed (default: the config's seed)"),
        opt("--top-k", type=int, default=None, help="k of in_top_k (default: capture.top_k where capture was on, "
                                                    "else 20; at most 64)"),
        opt("--against", action="append", default=[], metavar="SETTING",
            help="another setting, dotted.config.key=value (value as YAML; keys of one setting joined by commas), "
                 "e.g. engine.args.mamba_ssm_dtype=bfloat16 or engine.backend=transformers,gpus=0; repeat for more"),
        opt("--out", help="audit folder (default: <results_dir>/audit)"))),
    "status": Command(cmd_status, "progress of every shard", (
        opt("--watch", type=float, nargs="?", const=5.0, default=None, help="refresh every N seconds"),)),
    "forecast": Command(cmd_forecast, "time, disk and prefill cost of a planned dataset (docs/forecast.md)", (
        opt("--prompts", type=int, help="prompts (default: the built prompt set of --config/--results)"),
        opt("--output-tokens", type=float, help="mean output tokens per prompt (default: the run's measured)"),
        opt("--gpus", type=int, help="GPUs, one engine each (default: the config's gpus / GPUs per engine)"),
        opt("--tok-per-s", type=float, help="output tok/s per GPU (default: --log, else the run's own)"),
        opt("--req-per-s", type=float, help="whole-run requests/s instead of a per-GPU token rate"),
        opt("--log", help="an SGLang log: its decode lines' gen throughput is the per-GPU rate"),
        opt("--pilot", help="a finished run's results folder to measure output lengths and bytes per token from "
                            "(default: this run's, once merged; none: max_new_tokens and the formats)"),
        opt("--topk", type=int, help="k of the top-k sidecar to size (default: capture.top_k where capture is on, "
                                     "else 20)"),
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


@contextmanager
def _output_to(log: str | None):
    """A command's stdout and stderr in `log` where it was given one (prompts' --log: as the shell's `> log 2>&1`,
    logging, progress bars and the workers' output included), handing the console's stderr to the command as
    args.console for the lines a user must see; an error leaves them in the log, where Snakemake points. Without a
    log: the process's own."""
    if log is None:
        yield sys.stderr
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    os.makedirs(os.path.dirname(log) or ".", exist_ok=True)  # by hand, before any step made results/logs/
    target = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(target, 1)
    os.dup2(target, 2)
    os.close(target)
    with os.fdopen(os.dup(saved[1]), "w") as console:
        yield console
    sys.stdout.flush()
    sys.stderr.flush()
    for fd, original in zip((1, 2), saved):
        os.dup2(original, fd)
        os.close(original)


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
        with _output_to(getattr(args, "output_log", None)) as args.console:
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
