"""Stage 3: generate one shard: lease GPUs, skip every gen_key already committed anywhere, drive the engine,
commit parts, and have the checkpoint write the done file last, still under the shard's lock (the only declared
output, so a failure never deletes parts)."""

import errno
import logging
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from shardgen import ShardgenError
from shardgen.config import Config
from shardgen.generate import attempts, checkpoint, gpu_lease, hidden_preflight
from shardgen.generate.turns import TurnRequest, resume_points
from shardgen.layout import Layout, shard_id
from shardgen.store.atomic import free_bytes

log = logging.getLogger(__name__)


class CommitError(ShardgenError, RuntimeError):
    """A part could not be written (disk full, I/O error): the job stops, committed parts stay as they are."""


class DiskStillFull(ShardgenError, RuntimeError):
    """The shard's last attempt stopped on a full disk and there is no more room now: not started again."""


# The room a shard restarted after a full disk wants: a few of its largest parts, and never less than this.
MIN_ROOM_BYTES = 256 << 20
PARTS_OF_ROOM = 4


def _room_after_a_full_disk(shard_checkpoint: checkpoint.ShardCheckpoint, results: Path) -> None:
    """Refuse to start a shard whose last attempt stopped on a full disk while the disk has no more room: Snakemake's
    retries come at once and would only meet it again, each after starting an engine. Once space is freed, a run
    (a retry or a rerun) starts."""
    last = attempts.read_attempts(shard_checkpoint.folder)[-1:]
    if not last or last[0].get("cause") != attempts.DISK_FULL:
        return
    largest = max((entry["bytes"] for entry in shard_checkpoint.index().values()), default=0)
    need, free = max(MIN_ROOM_BYTES, PARTS_OF_ROOM * largest), free_bytes(results)
    if free < need:
        raise DiskStillFull(f"shard {shard_checkpoint.shard}: not started: its last attempt stopped on a full disk "
                            f"({last[0].get('detail')}) and {free:,} bytes are free on {results} now ({need:,} "
                            "wanted: room for a few parts); free space, then run the same command again (it resumes "
                            "from the committed parts)")


def _todo(config: Config, layout: Layout, shard: int, retry_limit: int | None,
          encode) -> tuple[int, list[TurnRequest]]:
    """A normal run generates the prompts with no committed row; a retry (retry_limit set) only the failed ones
    that have failed fewer than retry_limit times. A multi-turn conversation resumes at its first turn without a
    row that counts (turns.resume_points: also at a turn that ended it by context_exhausted and fits the context
    now, or at a committed turn that no longer fits it, which ends it there), under the same rule for that turn's
    key, except that a turn that does not fit is always taken (it is recorded as the end, never sent); after a
    retried turn its conversation goes on."""
    table = pq.read_table(layout.split(shard))
    built_for = set(table["context_length"].to_pylist()) - {None} if "context_length" in table.column_names else set()
    if built_for - {config.model.context_length}:
        # which committed turns count is judged at the prompt set's context (winners.sql), the turns sent at the
        # config's: the two must agree
        raise ShardgenError(f"{layout.split(shard)} was built for model.context_length {max(built_for)}, the config "
                            f"says {config.model.context_length}: rebuild the prompt set first (a run of the workflow "
                            "does: `snakemake --configfile ...`)")
    found = checkpoint.outcomes(layout)

    def wanted(key: str, turn: int) -> bool:
        aborts = found.aborts.get(key, 0)
        if retry_limit is None:
            return key not in found.generated and not aborts
        return 0 < aborts < retry_limit or (turn > 1 and key not in found.generated and not aborts)

    multi = [len(t) > 1 for t in table["turns"].to_pylist()]
    single = [i for i, (m, k) in enumerate(zip(multi, table["gen_key"].to_pylist())) if not m and wanted(k, 1)]
    todo = [TurnRequest.first(row) for row in table.take(single).to_pylist()] if single else []
    if any(multi):
        rows = table.filter(pa.array(multi)).to_pylist()
        done = checkpoint.committed_turns(layout, {r["conversation_id"] for r in rows})
        context_length = config.model.context_length
        todo += [r for r in resume_points(rows, done, encode, context_length)
                 if wanted(r.gen_key, r.turn) or r.exhausted(context_length)]
        if going_on := sum(r.gen_key in found.grew for r in todo):
            log.info("shard %d: %d conversation(s) ended by context_exhausted go on from their last committed turn: "
                     "that turn fits model.context_length %d now", shard, going_on, context_length)
        if ending := sum(r.gen_key in found.shrunk for r in todo):
            log.info("shard %d: %d conversation(s) end at a turn that no longer fits model.context_length %d: their "
                     "turns from there on leave the dataset (their parts keep them)", shard, ending, context_length)
    return table.num_rows, todo


def _follow(encode):
    """The next turn of a conversation once a turn completes (the driver ends it where that turn does not fit)."""
    def follow(prompt: TurnRequest, row: dict):
        return prompt.next(row["completion"], row["output_ids"], encode)
    return follow


def _run(config: Config, shard_checkpoint: checkpoint.ShardCheckpoint, todo: list[TurnRequest], gpu: str,
         model) -> dict:
    from shardgen.generate.driver import run_prompts, window
    from shardgen.engines.session import open_engine

    shard_dir, shard = shard_checkpoint.folder, shard_checkpoint.shard
    _room_after_a_full_disk(shard_checkpoint, config.results)
    attempt, engine_cfg, deaths = attempts.start_attempt(shard_dir, config.engine)
    if deaths:
        log.warning("shard %d attempt %d restarts after %s; engine settings now %s", shard, attempt,
                    [d["cause"] for d in deaths], engine_cfg)
    with attempts.running(shard_dir, attempt):  # from here on `status` can tell a live attempt from a dead one
        config = config.with_engine_config(engine_cfg)
        # what an engine sizes its settings from (`work`: the prompts it is about to run, as the engines read them)
        work = [{"prompt_ids": r.prompt_ids, "max_new_tokens": r.sampling.max_new_tokens, "turns": r.turns,
                 "turn": r.turn} for r in todo]
        def on_event(event: str, detail: str) -> None:  # the watchdog's stall or out-of-memory, in this attempt
            attempts.log_event(shard_dir, attempt, event, detail=detail)

        with open_engine(config, model, shard_dir, device="cpu" if gpu == "cpu" else "cuda", on_event=on_event,
                         work=work) as engine:
            attempts.log_event(shard_dir, attempt, "engine_started",
                               max_running_requests=engine.info.max_running_requests)
            log.info("shard %d attempt %d: %d prompts to generate, window %d", shard, attempt, len(todo),
                     window(config, engine, any(r.turns_left() > 1 for r in todo)))
            try:
                committed = run_prompts(engine, todo, shard_dir, config, shard=shard, attempt=attempt, gpu=gpu,
                                        desc=f"shard {shard_id(shard)}", follow=_follow(model.encode))
            except OSError as err:
                if err.errno in (errno.ENOSPC, errno.EDQUOT):
                    attempts.log_event(shard_dir, attempt, attempts.DISK_FULL, detail=str(err))
                raise CommitError(f"shard {shard}: committing a part failed ({err}); the "
                                  f"{len(shard_checkpoint.parts())} committed parts in {shard_dir} are intact, and a "
                                  "rerun resumes from them") from err
            attempts.log_event(shard_dir, attempt, "finished", committed=committed)
        return engine.info.record  # read once it is closed: the engine adds its run's retractions to it then


def generate_shard(config: Config, shard: int, done_path: Path, retry_limit: int | None = None) -> dict:
    layout = Layout(config.results)
    shard_checkpoint = checkpoint.ShardCheckpoint(layout, shard, done_path)
    with shard_checkpoint.lock():
        gpu = gpu_lease.lease_for(config)  # before torch is imported: it sets CUDA_VISIBLE_DEVICES
        model = config.target_model
        total, todo = _todo(config, layout, shard, retry_limit, model.encode)
        log.info("shard %d: %d prompts, %d to %s", shard, total, len(todo),
                 "generate" if retry_limit is None else "retry")
        hidden_preflight.check(config, layout, shard, todo)  # before the engine and any request
        engine_args = _run(config, shard_checkpoint, todo, gpu, model) if todo else None
        return shard_checkpoint.finish(engine_args, gpu)
