"""Normalize one source row of a public dataset format into chat messages plus the original answer."""

from collections.abc import Callable
from dataclasses import dataclass

ROLES = {"system": "system", "user": "user", "human": "user", "assistant": "assistant", "gpt": "assistant"}

class RowError(ValueError):
    """A row that cannot become a prompt; `reason` is the short code stored in rejected.parquet."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


@dataclass
class Conversation:
    messages: list[dict]
    reference: str | None
    dropped_turns: int
    turns: list[str]  # the user text opening each turn (turn 1's is in messages; `first`: that one alone)
    references: list[str | None]  # the original answer to each turn


def _text(row: dict, field: str, column: str, required: bool = True) -> str | None:
    if column not in row or row[column] is None:
        if required:
            raise RowError("missing_field", f"no {column!r} field" + (f" (for {field!r})" if column != field else ""))
        return None
    value = row[column]
    if not isinstance(value, str):
        raise RowError("wrong_type", f"{column!r} is {type(value).__name__}, expected a string")
    return value


def _turns(row: dict, column: str, role_key: str, content_key: str) -> list[dict]:
    turns = row.get(column)
    if turns is None:
        raise RowError("missing_field", f"no {column!r} field")
    if not isinstance(turns, (list, tuple)):
        raise RowError("wrong_type", f"{column!r} is {type(turns).__name__}, expected a list of turns")
    out = []
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict) or role_key not in turn or content_key not in turn:
            raise RowError("wrong_type", f"{column}[{i}] is not an object with {role_key!r} and {content_key!r}")
        role, content = turn[role_key], turn[content_key]
        if role not in ROLES:
            raise RowError("unknown_role", f"{column}[{i}] has role {role!r}; known: {sorted(ROLES)}")
        if not isinstance(content, str):
            raise RowError("wrong_type", f"{column}[{i}].{content_key} is {type(content).__name__}, expected a string")
        out.append({"role": ROLES[role], "content": content})
    return out


def _pair(row: dict, fields: dict, prompt_field: str, answer_fields: tuple[str, ...]) -> list[dict]:
    turns = [{"role": "user", "content": _text(row, prompt_field, fields.get(prompt_field, prompt_field))}]
    for field in answer_fields:
        answer = _text(row, field, fields.get(field, field), required=False)
        if answer is not None:
            return turns + [{"role": "assistant", "content": answer}]
    return turns


def _instruction(row: dict, fields: dict) -> list[dict]:
    instruction = _text(row, "instruction", fields.get("instruction", "instruction"))
    extra = _text(row, "input", fields.get("input", "input"), required=False)
    prompt = f"{instruction}\n\n{extra}" if extra and extra.strip() else instruction
    turns = [{"role": "user", "content": prompt}]
    output = _text(row, "output", fields.get("output", "output"), required=False)
    return turns + ([{"role": "assistant", "content": output}] if output is not None else [])


@dataclass(frozen=True)
class Format:
    normalize: Callable[[dict, dict], list[dict]]  # (row, fields) -> turns
    fields: tuple[str, ...]  # the columns it needs, by our name; a source's `fields` renames them
    about: str  # for the README


# Every input format, defined here only: the schema's enum and the README are checked against it.
def _sharegpt(row: dict, fields: dict) -> list[dict]:
    """ShareGPT turns; a top-level `system` string (FastChat's dummy_conversation_with_system.json) is the system
    turn unless the conversation has one of its own (`{"from": "system"}`)."""
    turns = _turns(row, fields.get("conversations", "conversations"), "from", "value")
    system = _text(row, "system", fields.get("system", "system"), required=False)
    if system and not any(t["role"] == "system" for t in turns):
        turns = [{"role": "system", "content": system}] + turns
    return turns


FORMATS = {
    "sharegpt": Format(_sharegpt, ("conversations",),
                       "`conversations: [{from: human|gpt|system, value}]`, optional top-level `system`"),
    "query_response": Format(lambda row, f: _pair(row, f, "query", ("response", "answer")), ("query",),
                             "`query` + `response` (MetaMathQA) or `answer` (CodeFeedback)"),
    "question_answer": Format(lambda row, f: _pair(row, f, "question", ("answer",)), ("question",),
                              "`question` + `answer` (WebInstructSub)"),
    "instruction": Format(_instruction, ("instruction",),
                          "`instruction` + optional `input` (joined with a blank line) + `output`"),
    "messages": Format(lambda row, f: _turns(row, f.get("messages", "messages"), "role", "content"), ("messages",),
                       "`[{role, content}]`"),
    "prompt": Format(lambda row, f: _pair(row, f, "prompt", ()), ("prompt",), "a `prompt` string"),
}


def turns_of(row: dict, fmt: str, fields: dict) -> list[dict]:
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}")
    return FORMATS[fmt].normalize(row, fields)


def _check_text(text: str, where: str) -> None:
    if "\x00" in text:
        raise RowError("invalid_text", f"{where} contains a NUL byte")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise RowError("invalid_text", f"{where} is not valid UTF-8 ({err.reason})") from None


def _later_turns(rest: list[dict]) -> tuple[list[str], list[str | None]]:
    """each_turn: after the first prompt, the conversation must alternate assistant, user, assistant, ...; a
    trailing user turn is a turn with no reference."""
    users: list[str] = []
    references: list[str | None] = [None]
    expected = "assistant"
    for i, turn in enumerate(rest):
        if turn["role"] != expected:
            raise RowError("not_alternating", f"message {i} after the first answer is {turn['role']!r}, expected "
                           f"{expected!r} (each_turn needs user and assistant turns to alternate)")
        if expected == "assistant":
            references[-1], expected = turn["content"], "user"
        else:
            where = f"user turn {len(users) + 2}"
            _check_text(turn["content"], where)
            if not turn["content"].strip():  # regenerated as if it were a question otherwise
                raise RowError("empty_prompt",
                               f"{where} is empty or whitespace (each_turn regenerates every user turn)")
            users.append(turn["content"])
            references.append(None)
            expected = "assistant"
    return users, references


def conversation(row, fmt: str, fields: dict, system_prompt: str | None,
                 multi_turn: str = "first") -> tuple[Conversation, bool]:
    """The prompt is the conversation up to the first assistant turn; returns it and whether its own system turn
    was replaced. each_turn: also every later user turn and every original answer."""
    if not isinstance(row, dict):
        raise RowError("not_object", f"row is {type(row).__name__}, expected an object")
    turns = turns_of(row, fmt, fields)
    first_answer = next((i for i, t in enumerate(turns) if t["role"] == "assistant"), len(turns))
    prompt, rest = turns[:first_answer], turns[first_answer:]
    replaced = system_prompt is not None and any(t["role"] == "system" for t in prompt)
    if system_prompt is not None:
        prompt = [{"role": "system", "content": system_prompt}] + [t for t in prompt if t["role"] != "system"]
    for i, turn in enumerate(prompt):
        _check_text(turn["content"], f"turn {i} ({turn['role']})")
    users = [t for t in prompt if t["role"] == "user"]
    if not users:
        raise RowError("no_user_turn", "the conversation has no user turn before the first assistant turn")
    if not any(t["content"].strip() for t in users):
        raise RowError("empty_prompt", "user turn 1 is empty or whitespace" if len(users) == 1 else
                       f"user turn 1 is empty or whitespace (all {len(users)} user messages before the first answer)")
    if multi_turn == "each_turn":
        later, references = _later_turns(rest)
        return Conversation(prompt, references[0], 0, [users[-1]["content"]] + later, references), replaced
    reference = rest[0]["content"] if rest else None
    return Conversation(prompt, reference, max(0, len(rest) - 1), [users[-1]["content"]], [reference]), replaced
