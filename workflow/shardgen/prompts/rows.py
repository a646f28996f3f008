"""The per-row work of the prompts stage, done on a chunk at a time in a worker process: normalize, render and
tokenize, keys. Each chunk's result depends only on its rows, so any number of workers gives the same output."""

from dataclasses import dataclass, field

import pyarrow as pa

from shardgen import ShardgenError
from shardgen.store import tables
from shardgen.model.chat import ChatEncoder
from shardgen.config import Config
from shardgen.config.sections import SourceConfig
from shardgen.prompts.formats import RowError, conversation
from shardgen.keys import conversation_prompt_id, gen_key_of
from shardgen.prompts.sources import Chunk
from shardgen.sampling import names, origin_text


class PromptsError(ShardgenError, RuntimeError):
    """A row crashed the prompts stage (a bug or the tokenizer): names the source and row; nothing is written."""


@dataclass
class ChunkResult:
    source: int
    rows_read: int = 0
    system_replaced: int = 0
    rejected: list[tuple[int, str, str, str | None]] = field(default_factory=list)  # (source_row, reason, detail, id)
    candidates: pa.RecordBatch | None = None  # every normalized row, tables.PROMPTS
    ids: list[str | None] = field(default_factory=list)  # each candidate's own `id` (row_id)
    keys: list[bytes] = field(default_factory=list)  # dedupe key of each candidate
    too_long: dict[int, str] = field(default_factory=dict)  # candidate index -> detail


def row_id(row) -> str | None:
    """The row's own `id` field as text (ShareGPT rows carry one), for finding a rejected or duplicate row."""
    return str(row["id"]) if isinstance(row, dict) and row.get("id") is not None else None


class SourcePlan:
    """What every row of one source shares: format, sampling (a listed field: its list; each row gets its prompt's
    value) and where each field's value came from, template arguments, the gen_key function (over the lists, so a
    changed list changes every key). served: the model's sampling as served (ModelInfo.served_sampling)."""

    def __init__(self, config: Config, source: SourceConfig, fingerprint: dict, served: dict):
        self.source, self.name = source, source.name
        self.sampling = config.sampling_for(source, served)
        self.origin = origin_text(config.sampling_origins(source, served))
        self.template_kwargs = config.template_kwargs_for(source)
        self.extra = config.sampling_extra(source)
        self.gen_key = gen_key_of(fingerprint, config.gen_settings(source, served))
        self.budget = config.model.context_length - self.sampling["max_new_tokens"]
        self.context_length = config.model.context_length


class ChunkProcessor:
    def __init__(self, config: Config, fingerprint: dict, served: dict, chat: ChatEncoder):
        self.chat = chat
        self.plans = [SourcePlan(config, source, fingerprint, served) for source in config.sources]

    def process(self, chunk: Chunk) -> ChunkResult:
        plan = self.plans[chunk.source]
        result = ChunkResult(chunk.source, rows_read=len(chunk))
        rows, convs = [], []
        for source_row, row in chunk.rows():
            try:
                if isinstance(row, RowError):
                    raise row
                conv, replaced = conversation(row, plan.source.format, plan.source.fields, plan.source.system_prompt,
                                              plan.source.multi_turn)
            except RowError as err:
                result.rejected.append((source_row, err.reason, err.detail, row_id(row)))
                continue
            except Exception as err:
                raise PromptsError(f"source {plan.name!r} row {source_row}: {type(err).__name__}: {err}") from err
            result.system_replaced += replaced
            rows.append(source_row)
            result.ids.append(row_id(row))
            convs.append(conv)
        messages = [c.messages for c in convs]
        ids = self._encode(plan, rows, messages)
        pids = [conversation_prompt_id(c.messages, c.turns[1:]) for c in convs]
        result.keys = [bytes.fromhex(p[:32]) for p in pids]
        lengths = [len(i) for i in ids]
        result.too_long = {i: f"{n} prompt tokens + max_new_tokens {plan.sampling['max_new_tokens']} > "
                              f"context_length {plan.context_length}" for i, n in enumerate(lengths) if n > plan.budget}
        n = len(rows)
        per_row = [SourceConfig.sampling_of(plan.sampling, p) for p in pids]  # a listed field: this prompt's value
        work = self._work_tokens(plan, convs, lengths)
        result.candidates = pa.record_batch({
            "prompt_id": pids, "gen_key": [plan.gen_key(p) for p in pids], "source": [plan.name] * n,
            "source_row": rows, "messages": messages, "prompt_ids": ids, "prompt_tokens": lengths,
            "max_new_tokens": [s["max_new_tokens"] for s in per_row], "context_length": [plan.context_length] * n,
            **{k: [s[k] for s in per_row] for k in names()},
            "sampling_extra": [plan.extra] * n, "sampling_origin": [plan.origin] * n,
            "reference": [c.reference for c in convs], "dropped_turns": [c.dropped_turns for c in convs],
            "conversation_id": pids, "turns": [c.turns for c in convs], "references": [c.references for c in convs],
            "work_tokens": work,
        }, schema=tables.PROMPTS)
        return result

    def _work_tokens(self, plan: SourcePlan, convs: list, lengths: list[int]) -> list[int]:
        """The whole conversation's expected tokens: turn t's prompt is estimated as turn 1's plus, per earlier
        turn, a full answer (max_new_tokens) and the next user turn's tokens (its text alone, tokenized; the
        template's few header tokens are left out); each turn adds max_new_tokens."""
        new = plan.sampling["max_new_tokens"]
        later = [u for c in convs for u in c.turns[1:]]
        user_tokens = iter(map(len, self.chat.ids(later))) if later else iter(())
        work = []
        for conv, prompt in zip(convs, lengths):
            total = prompt + new
            for _ in conv.turns[1:]:
                prompt += new + next(user_tokens)
                total += prompt + new
            work.append(total)
        return work

    def _encode(self, plan: SourcePlan, rows: list[int], messages: list[list[dict]]) -> list[list[int]]:
        if not messages:
            return []
        try:
            return self.chat.encode(messages, plan.template_kwargs)
        except BaseException as err:  # a Rust panic is a BaseException; find the row that causes it
            if isinstance(err, (KeyboardInterrupt, SystemExit)):
                raise
            for row, conv in zip(rows, messages):
                try:
                    self.chat.encode([conv], plan.template_kwargs)
                except BaseException as row_err:
                    if isinstance(row_err, (KeyboardInterrupt, SystemExit)):
                        raise
                    raise PromptsError(f"source {plan.name!r} row {row}: the tokenizer failed: "
                                       f"{type(row_err).__name__}: {row_err}") from None
            raise PromptsError(f"source {plan.name!r} rows {rows[0]}-{rows[-1]}: the tokenizer failed on the batch: "
                               f"{type(err).__name__}: {err}") from None
