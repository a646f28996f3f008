"""What each `shardgen` subcommand does with its arguments: read them, call the stage's function, print what it
returns (the table of commands and options is `cli.COMMANDS`)."""

import json
import time
from pathlib import Path

from shardgen import ShardgenError
from shardgen.store.atomic import write_text
from shardgen.config import Config, ConfigError, complete_config, config_path, results_dir_of
from shardgen.layout import AuditLayout, Layout, TuneLayout, shard_id


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


def _layout_of_run(results: Path) -> Layout:
    """The results folder a read-only command reports on (`_results_dir`), refused where no run has written: a
    mistyped --results or results_dir would otherwise read as an empty run."""
    layout = Layout(results)
    if not layout.holds_a_run():
        raise ShardgenError(f"no run in {layout.root}: no prompt set, split or generated parts there (check --results, "
                            "or the results_dir of --config)")
    return layout


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
    from shardgen.model.demo import build

    build(Path(args.out), Path(args.corpus), seed=args.seed)


def cmd_prompts(args):
    from shardgen.prompts.stage import build_prompts, lost_rows_lines

    counts = build_prompts(_config(args), Path(args.out), workers=args.workers)
    print(json.dumps(counts, indent=1))
    for line in lost_rows_lines(counts, Path(args.out)):
        print(line, flush=True)  # the command's output (with --log, the log)
        if args.output_log is not None:  # and on the console, which Snakemake shows
            print(line, file=args.console, flush=True)


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


def cmd_export_hidden(args):
    from shardgen.merge.hidden_exports import export

    config = _config(args)
    out = Path(args.out) if args.out else None
    try:
        record = export(config, Layout(config.results), args.trainer, out)
    except KeyboardInterrupt:
        raise Interrupted(f"export-hidden {args.trainer} interrupted: nothing written under {out or 'its folder'}, "
                          "the same command starts it over") from None
    left_out = "; ".join(f"{n} {why}" for why, n in record["left_out"].items()) or "nothing"
    print(f"{record['trainer']}: {record['samples']} samples, {record['bytes']:,} bytes in {record['folder']} "
          f"(layers {record['layers']}, {record['dtype']}); left out: {left_out}\n"
          f"what it holds: {Path(record['folder']) / 'export.json'}\ntrain: {record['train']['command']}")


def cmd_report(args):
    from shardgen.report.summary import report

    record = report(_config(args), [Path(p) for p in args.outputs], [Path(p) for p in args.done], Path(args.out))
    print(json.dumps({k: v for k, v in record.items() if not isinstance(v, list)}, indent=1))


def cmd_query(args):
    from shardgen.store import db

    results = _results_dir(args)
    if args.list or not args.name:
        width = max(map(len, db.user_queries()))
        print("\n".join(f"{name.ljust(width)}  {purpose}" for name, purpose in db.user_queries().items()))
        return
    if db.is_internal(args.name):
        raise ShardgenError(f"{args.name!r} is one of the workflow steps' own queries (it needs their parameters), not "
                            f"a user query; `shardgen query --list` shows those")
    from shardgen.generate import checkpoint

    print(_table(db.query(checkpoint.connect(_layout_of_run(results)), args.name)))


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


def cmd_audit(args):
    from shardgen.audit import audit
    from shardgen.audit.report import drift_table, overview

    config = _config(args)
    out = Path(args.out) if args.out else Layout(config.results).audit_dir
    summary = audit(config, out, sample=args.sample, seed=config.seed if args.seed is None else args.seed,
                    top_k=args.top_k, against=args.against)
    sample = summary["sample"]
    print(f"{sample['turns']} turns sampled (seed {sample['seed']}), top-k {sample['top_k']}; vs_gen: |re-scored - "
          "generation-time| chosen-token logprob (captured turns scored at their sampling temperature: `compared`), "
          "vs_own: |re-scored - own re-scored|")
    print(_table(overview(summary)))
    for index, setting in enumerate(summary["settings"]):
        if setting["status"] == "ok":
            print(f"\n{setting['setting']}: the turns that drift most\n{_table(drift_table(setting))}")
        else:
            print(f"\n{setting['setting']}: failed (rc {setting['returncode']}), log: "
                  f"{AuditLayout(out).engine_log(index)}\n" + "\n".join(setting["log_tail"][-5:]))
    print(f"\nwritten: {AuditLayout(out).summary}, {AuditLayout(out).turns}")


def _prompt_set_stamp(layout: Layout) -> tuple:
    """What the prompt set and its split are now (their files' change times)."""
    files = [*layout.split_files(), layout.prompt_table("sources")]
    return tuple((path.name, path.stat().st_mtime_ns) for path in files if path.exists())


def cmd_status(args):
    from shardgen.merge.freshness import changed_by_config
    from shardgen.report import eta
    from shardgen.report.status import config_line, status

    layout = _layout_of_run(_results_dir(args))
    # The run's own config (whole, and naming this results folder) is what a rerun would act on: status judges the
    # prompt set against it, so a change not yet rebuilt into the prompt set shows before the rerun does it.
    config = _config_if_complete(args)
    if config is not None and config.results.resolve() != layout.root.resolve():
        config = None
    changes, note, judged = None, None, None
    while True:
        # judged again only when the prompt set changes: it loads the model's tokenizer and keys every split row
        if config is not None and (built := _prompt_set_stamp(layout)) != judged:
            judged = built
            try:
                changes = changed_by_config(config, layout)
                note = config_line(changes)
            except ShardgenError as err:  # status reads the results folder; a config it cannot judge only says why
                changes, note = None, f"config: not judged against the prompt set ({err})"
        rows = status(layout, changes)
        run = eta.annotate(layout, rows)
        print(_table(rows) + "\n" + eta.render(run) + (f"\n{note}" if note else ""), flush=True)
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
        if storage is None or args.log:  # a log the user named and that gives no rate is their error, plan or not
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
