"""A folder of parts as the checkpoint writes it (generate/checkpoint.py is its owner; nothing else imports this
module): the one builder of a part row, the part writer, the parts index (written and read here only) and
quarantine of an unreadable part."""

import json
import logging
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from shardgen.store import tables
from shardgen.capture import aligned, signal_only, turn_signal
from shardgen.store.atomic import write_table, write_text
from shardgen.layout import (hidden_part_files, hidden_part_path, next_number, part_files, part_path, parts_index_path,
                             quarantine_dir, stale_part_temps)
from shardgen.store.hidden import write_states
from shardgen.sampling import names

log = logging.getLogger(__name__)


def quarantine(path: Path, reason: str) -> Path:
    """Move an unreadable part aside (never delete it); its rows are then generated again. Every shard's job reads
    every shard's parts (a conversation's earlier turns), so two jobs starting at once can both find one part
    unreadable: the second to move it finds it moved already."""
    target = quarantine_dir(path.parent) / path.name
    target.parent.mkdir(exist_ok=True)
    try:
        os.replace(path, target)
    except FileNotFoundError:
        if not target.exists():
            raise
        log.info("part %s is unreadable: another job moved it to %s", path, target)
        return target
    if hidden_part_path(path).exists():  # its hidden states go with it: they are generated again with its rows
        os.replace(hidden_part_path(path), hidden_part_path(target))
    log.error("part %s is unreadable (%s): moved to %s; its rows will be generated again", path, reason, target)
    return target


def unreadable(files: list[str]) -> dict[str, str]:
    """The parts among `files` that cannot be read, with why (slow: only after a query over all of them failed)."""
    bad = {}
    for path in files:
        try:
            pq.read_table(path, columns=["gen_key", "finish_reason"])
        except (OSError, pa.ArrowException) as err:
            bad[path] = f"{type(err).__name__}: {err}"
    return bad


def part_row(request, *, shard: int, attempt: int, gpu: str, result=None, ended: str | None = None,
             submitted: datetime | None = None, latency_s: float = 0.0) -> dict:
    """The one builder of a part row (tables.PART): a turn `request` (generate.turns.TurnRequest) answered by the
    engine's `result`, or, with `ended` (why), the end of its conversation before this turn (nothing generated)."""
    finished = datetime.now(timezone.utc)
    capture = {"token_logprobs": None, "top_ids": None, "top_logprobs": None}
    signal = turn_signal(None, None)
    if ended is not None:
        outcome: dict[str, Any] = {"completion": None, "output_ids": [], "finish_reason": "context_exhausted",
                                   "completion_tokens": 0, "cached_tokens": 0, "error": ended}
    else:
        error = result.error
        if error is None and result.prompt_tokens != len(request.prompt_ids):
            error = f"engine counted {result.prompt_tokens} prompt tokens, we sent {len(request.prompt_ids)}"
        outcome = {"completion": result.text, "output_ids": result.output_ids,
                   "finish_reason": "abort" if error else result.finish_reason,
                   "completion_tokens": len(result.output_ids), "cached_tokens": result.cached_tokens, "error": error}
        if not error and signal_only(result):  # capture.signal: the turn's figures, nothing kept per token
            signal = turn_signal(aligned(len(result.output_ids), result.logprobs, None, None, 0)["token_logprobs"],
                                 None)
        elif not error:  # the capture, one entry per output id (shardgen.capture), committed with the turn
            k = max((len(ids) for ids in result.top_ids or ()), default=0)
            capture = aligned(len(result.output_ids), result.logprobs, result.top_ids, result.top_logprobs, k)
            signal = turn_signal(capture["token_logprobs"], capture["top_logprobs"])
    later = request.turn > 1  # turn 1's prompt is the prompts row's; a later turn carries its own
    return {"prompt_id": request.prompt_id, "gen_key": request.gen_key, "shard": shard, "attempt": attempt,
            "prompt_tokens": len(request.prompt_ids), "latency_s": latency_s, "submitted_at": submitted or finished,
            "finished_at": finished, "gpu": gpu, **outcome, "conversation_id": request.conversation_id,
            "turn": request.turn, "base_key": request.base_key, "messages": request.history if later else None,
            "prompt_ids": request.prompt_ids if later else None,
            **{name: getattr(request.sampling, name) for name in names()},
            **capture, **signal,
            # not a PART column: PartWriter.commit writes it beside the part (store/hidden.py)
            "hidden_states": None if ended is not None or outcome["error"] else getattr(result, "hidden_states", None)}


def read_index(folder: Path) -> dict[str, dict]:
    """The parts index of a folder of parts: part name -> its entry (rows, attempt, tokens, bytes)."""
    entries = {}
    path = parts_index_path(folder)
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                entry = json.loads(line)
                entries[entry["part"]] = entry
            except (ValueError, KeyError, TypeError):
                continue  # a line cut by a crash mid-append
    return entries


class PartWriter:
    """Numbers and commits the parts of a folder (a shard's, a tune setting's); never rewrites a committed one."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        for stale in stale_part_temps(self.folder):
            stale.unlink()
        existing = part_files(self.folder)
        for orphan in set(hidden_part_files(self.folder)) - {hidden_part_path(p) for p in existing}:
            orphan.unlink()  # written before a part whose commit did not happen: its turns are generated again
        self.next_index = next_number(existing)
        self._forget_lost_parts({p.name for p in existing})

    def _forget_lost_parts(self, existing: set[str]) -> None:
        """Drop the index lines of parts that are gone (deleted, quarantined): their rows are generated again now."""
        index = read_index(self.folder)
        for name in sorted(set(index) - existing):
            log.warning("%s: %s is gone; its rows are generated again", self.folder, name)
        if set(index) - existing:
            write_text("".join(json.dumps(e) + "\n" for name, e in index.items() if name in existing),
                       parts_index_path(self.folder))

    def commit(self, rows: list[dict]) -> Path:
        path = part_path(self.folder, self.next_index)
        if states := {r["gen_key"]: r["hidden_states"] for r in rows if r.get("hidden_states")}:
            write_states(states, hidden_part_path(path))  # first: a committed part always has its states
        write_table(pa.Table.from_pylist(rows, schema=tables.PART), path)  # the schema's columns only
        self.next_index += 1
        # Tells `shardgen status` which parts were committed, so a part deleted or moved away is named as lost.
        entry = {"part": path.name, "rows": len(rows), "attempt": rows[0]["attempt"],
                 "tokens": sum(r["completion_tokens"] for r in rows), "bytes": path.stat().st_size}
        if states:
            entry["hidden_bytes"] = hidden_part_path(path).stat().st_size
        with open(parts_index_path(self.folder), "a") as f:
            f.write(json.dumps(entry) + "\n")
        return path
