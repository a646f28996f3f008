"""Conversations regenerated turn by turn (`multi_turn: each_turn`): where each conversation of a shard resumes,
and the next turn's request once a turn completes. Turn t's prompt is the chat template applied to the system
turn, user turns 1..t and the model's own answers 1..t-1 (its completion text as the assistant `content`: a
template that strips reasoning from history, as Qwen3's does, keeps doing so); its gen_key chains the previous
turn's key with the exact token ids that turn generated (keys.turn_key)."""

import glob
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from shardgen.keys import turn_key
from shardgen.generate.checkpoint import FINAL_REASONS, quarantine

COLUMNS = ["gen_key", "finish_reason", "completion", "output_ids", "finished_at"]


def committed_turns(parts_glob: str, conversation_ids: set[str]) -> dict[str, dict]:
    """gen_key -> its winning committed row (the earliest finished one, as winners.sql picks; else a recorded
    end) for the turns of these conversations, from every shard's parts."""
    best: dict[str, tuple] = {}
    if not conversation_ids:
        return {}
    wanted = pa.array(sorted(conversation_ids), pa.string())
    for path in sorted(glob.glob(parts_glob)):
        try:
            table = pq.read_table(path, columns=COLUMNS + ["conversation_id"],
                                  filters=[("conversation_id", "in", wanted)])
        except (OSError, pa.ArrowException) as err:
            quarantine(Path(path), f"{type(err).__name__}: {err}")
            continue
        for row_number, row in enumerate(table.to_pylist()):
            if row["finish_reason"] not in FINAL_REASONS:
                continue
            rank = (row["finish_reason"] == "context_exhausted", row["finished_at"], path, row_number)
            if row["gen_key"] not in best or rank < best[row["gen_key"]][0]:
                best[row["gen_key"]] = (rank, row)
    return {key: row for key, (_, row) in best.items()}


def template_kwargs(prompt: dict) -> dict:
    return json.loads(prompt["sampling_extra"] or "{}").get("chat_template_kwargs", {})


def first_request(row: dict) -> dict:
    """Turn 1 of a prompts row (a `first` source's only turn): the row itself plus its turn columns."""
    return {**row, "base_key": row["gen_key"], "turn": 1, "history": list(row["messages"]), "prompt_turn": None}


def next_request(prompt: dict, completion: str, output_ids: list[int], encode) -> dict | None:
    """The request for the turn after `prompt` (which produced completion/output_ids), or None at the end."""
    turn = prompt["turn"] + 1
    if turn > len(prompt["turns"]):
        return None
    history = prompt["history"] + [{"role": "assistant", "content": completion},
                                   {"role": "user", "content": prompt["turns"][turn - 1]}]
    ids = encode(history, template_kwargs(prompt))
    return {**prompt, "gen_key": turn_key(prompt["gen_key"], output_ids), "turn": turn, "history": history,
            "prompt_ids": ids, "prompt_turn": turn}


def resume_points(rows: list[dict], done: dict[str, dict], encode) -> list[dict]:
    """For each multi-turn conversation (prompts rows), the request of its first uncommitted turn; none for a
    conversation that is complete or ended (context_exhausted). Committed turns are never generated again."""
    todo = []
    for row in rows:
        request = first_request(row)
        while request is not None and (hit := done.get(request["gen_key"])) is not None:
            if hit["finish_reason"] == "context_exhausted":
                request = None
                break
            request = next_request(request, hit["completion"], hit["output_ids"], encode)
        if request is not None:
            todo.append(request)
    return todo


def exhausted(request: dict, context_length: int) -> str | None:
    """Why turn `request` cannot run (its prompt and max_new_tokens do not fit the context), or None."""
    need = len(request["prompt_ids"]) + request["max_new_tokens"]
    if request["turn"] > 1 and need > context_length:
        return (f"turn {request['turn']}: {len(request['prompt_ids'])} prompt tokens + max_new_tokens "
                f"{request['max_new_tokens']} > context_length {context_length}")
    return None
