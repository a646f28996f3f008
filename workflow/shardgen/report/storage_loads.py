"""The token loads a storage plan scales by: how many turns, conversations and tokens the planned prompt set will
put in the files, and, for a pilot run, how many its files actually hold.

Two loads matter, because the files hold two kinds of rows: per turn (dataset/data.parquet, exports/turns.*: every
turn's prompt + output) and per conversation (exports/tokens.* and the text exports: the last turn's prompt +
output, which holds the whole conversation). Output length per turn is the pilot's mean for the source, else the
source's max_new_tokens (an upper bound: nothing ran yet), and the plan says which."""

from dataclasses import dataclass
from pathlib import Path

import duckdb

from shardgen.store import db


@dataclass(frozen=True)
class Loads:
    turns: int  # rows of the per-turn files
    conversations: int  # rows of the per-conversation files
    turn_tokens: int  # prompt + output tokens summed over turns (what a per-turn row holds)
    conversation_tokens: int  # the last turn's prompt + output, summed over conversations
    output_tokens: int  # generated tokens (what the top-k sidecar holds an entry for)

    def rows(self, driver: str) -> int:
        return {"turns": self.turns, "conversations": self.conversations}[driver]

    def of(self, driver: str) -> int:
        return {"turns": self.turn_tokens, "conversations": self.conversation_tokens}[driver]


def pilot_output_lengths(dataset: Path) -> dict[str, float]:
    """Mean generated tokens per turn, per source, in a finished run's dataset."""
    rows = duckdb.execute(f"SELECT source, avg(completion_tokens) FROM read_parquet({db.quote(dataset)}) "
                      "GROUP BY source").fetchall()
    return {source: float(mean) for source, mean in rows}


def pilot_loads(dataset: Path) -> dict[str, Loads]:
    """Per source, what a finished run's files hold, counted from its dataset (the files are rendered from it)."""
    rows = duckdb.execute(f"""
        WITH d AS (SELECT source, conversation_id, turn, prompt_tokens + completion_tokens AS tokens,
                          completion_tokens FROM read_parquet({db.quote(dataset)})),
             last AS (SELECT source, conversation_id, arg_max(tokens, turn) AS tokens FROM d GROUP BY ALL)
        SELECT source, count(*), (SELECT count(*) FROM last l WHERE l.source = d.source), sum(tokens),
               (SELECT sum(tokens) FROM last l WHERE l.source = d.source), sum(completion_tokens)
        FROM d GROUP BY source""").fetchall()
    return {r[0]: Loads(r[1], r[2], int(r[3]), int(r[4]), int(r[5])) for r in rows}


def planned_loads(prompts: Path, output_lengths: dict[str, float]) -> dict[str, Loads]:
    """Per source, the planned prompt set's loads at the given output length per source (a source not in
    output_lengths: its max_new_tokens). prompts.parquet's work_tokens is a conversation's sum over its n turns of
    (prompt + max_new_tokens), turn t's prompt counting t-1 earlier answers of max_new_tokens: so n(n+1)/2 answers
    in all, and at output length L the sum is work_tokens - (max_new_tokens - L) * n(n+1)/2. Turn prompts grow by
    about the same each turn, so the last turn's tokens are 2 x the mean turn's less the first turn's."""
    con = duckdb.connect()
    con.execute("CREATE TEMP TABLE lengths (source VARCHAR, tokens DOUBLE)")
    if output_lengths:
        con.executemany("INSERT INTO lengths VALUES (?, ?)", list(output_lengths.items()))
    rows = con.execute(f"""
        WITH p AS (SELECT source, prompt_tokens, max_new_tokens, work_tokens,
                          greatest(coalesce(len(turns), 1), 1) AS n
                   FROM read_parquet({db.quote(prompts)})),
             c AS (SELECT p.*, coalesce(l.tokens, max_new_tokens) AS out FROM p LEFT JOIN lengths l USING (source)),
             w AS (SELECT *, work_tokens - (max_new_tokens - out) * n * (n + 1) / 2 AS work FROM c)
        SELECT source, sum(n), count(*), sum(work),
               sum(CASE WHEN n = 1 THEN work ELSE 2 * work / n - (prompt_tokens + out) END), sum(n * out)
        FROM w GROUP BY source ORDER BY source""").fetchall()
    return {r[0]: Loads(int(r[1]), r[2], round(r[3]), round(r[4]), round(r[5])) for r in rows}


def calibrated(plan: dict[str, Loads], estimated_pilot: dict[str, Loads], pilot: dict[str, Loads]) -> dict[str, Loads]:
    """The plan's token counts scaled, per source, by how far the same estimate fell from the pilot's real counts
    (work_tokens leaves out the template's headers of later turns, and a history's answer re-tokenized may not
    have the length it was generated with): measured, where the pilot ran the source."""
    def scale(loads: Loads, source: str) -> Loads:
        est, real = estimated_pilot.get(source), pilot.get(source)
        if not (est and real and est.turn_tokens and est.conversation_tokens):
            return loads
        return Loads(loads.turns, loads.conversations,
                     round(loads.turn_tokens * real.turn_tokens / est.turn_tokens),
                     round(loads.conversation_tokens * real.conversation_tokens / est.conversation_tokens),
                     loads.output_tokens)

    return {source: scale(loads, source) for source, loads in plan.items()}


def total(per_source: dict[str, Loads]) -> Loads:
    values = list(per_source.values())
    return Loads(*(sum(getattr(v, f) for v in values) for f in
                   ("turns", "conversations", "turn_tokens", "conversation_tokens", "output_tokens")))
