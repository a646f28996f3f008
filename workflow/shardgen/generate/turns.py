"""Typed requests: a turn request (a conversation's first turn, its next turn once a turn completes, and the point
where a conversation resumes) and its `Sampling`. Turn t's prompt is the chat template applied to the system turn,
user turns 1..t and the model's own answers 1..t-1 (its completion text as the assistant `content`: a template that
strips reasoning from history, as Qwen3's does, keeps doing so); its gen_key chains the previous turn's key with the
exact token ids that turn generated (keys.turn_key). A plain prompt (`first` sources) is turn 1 of itself."""

import json
from dataclasses import Field, asdict, dataclass, fields, replace
from typing import TYPE_CHECKING, Any, ClassVar, Self

from shardgen.keys import turn_key
from shardgen.sampling import sampling_dataclass


class _SamplingValue:
    if TYPE_CHECKING:  # what the dataclass made with it as its base (Sampling) has
        __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

        def __init__(self, **values: Any) -> None: ...

    @classmethod
    def of(cls, row: dict) -> Self:
        return cls(**{f.name: row[f.name] for f in fields(cls)})

    def as_dict(self) -> dict:
        return asdict(self)


# How a request is sampled: max_new_tokens and one value per sampling field (shardgen.sampling.FIELDS), each read
# from the prompts row's column of its name and sent to the engine under that name.
if TYPE_CHECKING:
    @dataclass(frozen=True)
    class Sampling(_SamplingValue):
        """What the checker knows of the class made from FIELDS below: max_new_tokens, and a sampling field's
        value (an int or a float) by its name."""
        max_new_tokens: int

        def __getattr__(self, name: str) -> Any: ...
else:
    Sampling = sampling_dataclass("Sampling", [("max_new_tokens", int)], lambda f: f.python_type,
                                  bases=(_SamplingValue,))


@dataclass(frozen=True)
class TurnRequest:
    """One turn to generate. base_key: the gen_key of the conversation's prompts row (its turn 1); turns: the user
    text opening each turn; history: the messages this turn's prompt_ids were rendered from."""
    prompt_id: str
    conversation_id: str
    base_key: str
    gen_key: str
    turn: int
    turns: tuple[str, ...]
    history: list[dict]
    prompt_ids: list[int]
    sampling: Sampling
    template_kwargs: dict
    source: str | None = None  # the prompts row's (whether its turns are captured: capture.Capture.wants)

    @classmethod
    def first(cls, row: dict) -> "TurnRequest":
        """Turn 1 of a prompts row (a `first` source's only turn)."""
        extra = json.loads(row.get("sampling_extra") or "{}")
        return cls(prompt_id=row["prompt_id"], conversation_id=row.get("conversation_id") or row["prompt_id"],
                   base_key=row["gen_key"], gen_key=row["gen_key"], turn=1, turns=tuple(row.get("turns") or ()),
                   history=list(row.get("messages") or ()), prompt_ids=list(row["prompt_ids"]),
                   sampling=Sampling.of(row), template_kwargs=extra.get("chat_template_kwargs", {}),
                   source=row.get("source"))

    def next(self, completion: str, output_ids: list[int], encode) -> "TurnRequest | None":
        """The request for the turn after this one (which produced completion/output_ids), or None at the end."""
        turn = self.turn + 1
        if turn > len(self.turns):
            return None
        history = self.history + [{"role": "assistant", "content": completion},
                                  {"role": "user", "content": self.turns[turn - 1]}]
        return replace(self, gen_key=turn_key(self.gen_key, output_ids), turn=turn, history=history,
                       prompt_ids=encode(history, self.template_kwargs))

    def turns_left(self) -> int:
        """This turn and the conversation's turns after it."""
        return max(1, len(self.turns) - self.turn + 1)

    def exhausted(self, context_length: int) -> str | None:
        """Why this turn cannot run (its prompt and max_new_tokens do not fit the context), or None. Turn 1 always
        fits: the prompts stage rejects a prompt that does not (too_long)."""
        need = len(self.prompt_ids) + self.sampling.max_new_tokens
        if self.turn > 1 and need > context_length:
            return (f"turn {self.turn}: {len(self.prompt_ids)} prompt tokens + max_new_tokens "
                    f"{self.sampling.max_new_tokens} > context_length {context_length}")
        return None


def resume_points(rows: list[dict], done: dict[str, dict], encode, context_length: int) -> list[TurnRequest]:
    """For each multi-turn conversation (prompts rows), the request of its first turn without a committed row
    (`done`: gen_key -> the row it counts by); none for a conversation that is complete, or that ended by
    context_exhausted at a turn that still does not fit context_length. A conversation ended under a smaller
    limit goes on from that turn, its committed turns kept. Committed turns are never generated again."""
    todo = []
    for row in rows:
        request: TurnRequest | None = TurnRequest.first(row)
        while request is not None and (hit := done.get(request.gen_key)) is not None:
            if not hit["generated"]:  # a recorded end
                if request.exhausted(context_length) is not None:
                    request = None
                break
            request = request.next(hit["completion"], hit["output_ids"], encode)
        if request is not None:
            todo.append(request)
    return todo
