"""`mamba_strategy: auto`: the hybrid-Mamba cache strategy chosen per run from the work it is about to do.

A prefix cache pays where requests reuse a prefix: a conversation regenerated `each_turn` sends its whole
history again at every turn, and prompts may share a long common system prompt. Without that reuse it only costs:
`no_radix` holds one mamba-state slot per running request against three for `no_buffer` (args.py's
SLOTS_PER_REQUEST), so more requests run at once (on nh8b with a float32 state, 7,416 against 5,732 out tok/s at
1,024 running: the README's tune paragraph).

Which prefix-cache strategy wins on multi-turn work is not measured yet (issue 24 item 2): `no_buffer` is the
choice until then, as it stores each request's state at its end, which is what the next turn reuses. The long-prefix
thresholds are not measured either; they are named here so the measurement can set them."""

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass

PREFIX_CACHE_STRATEGY = "no_buffer"
LONG_PREFIX_TOKENS = 256  # a prompt "shares a long prefix" when its first this-many tokens open another prompt too
SHARED_PREFIX_SHARE = 0.5  # ... and the prefix cache is chosen when at least this share of the prompts do
SAMPLE = 10_000  # prompts looked at (evenly spaced over the work): the check stays well under a second


@dataclass(frozen=True)
class AutoChoice:
    """What `auto` resolved to, and the evidence: recorded in the done file's engine section."""
    strategy: str
    why: str
    prompts: int  # the work's prompts (first or resumed turns)
    multi_turn: int  # of them, conversations with a later turn still to run
    shared_prefix: int  # of the prompts looked at, those whose first LONG_PREFIX_TOKENS open another one too
    sampled: int

    def as_dict(self) -> dict:
        return asdict(self)


def _shared_long_prefixes(prompt_ids: list[list[int]]) -> int:
    heads = Counter(tuple(ids[:LONG_PREFIX_TOKENS]) for ids in prompt_ids if len(ids) >= LONG_PREFIX_TOKENS)
    return sum(n for n in heads.values() if n > 1)


def resolve(work: Sequence[dict]) -> AutoChoice:
    """The strategy for these requests (prompts rows or resume points: `prompt_ids`, and `turns`/`turn` for a
    conversation regenerated `each_turn`)."""
    multi = sum(len(p.get("turns") or ()) > p.get("turn", 1) for p in work)
    step = max(1, len(work) // SAMPLE)
    sample = [p["prompt_ids"] for p in work[::step]]
    shared = _shared_long_prefixes(sample)
    facts = {"prompts": len(work), "multi_turn": multi, "shared_prefix": shared, "sampled": len(sample)}
    if multi:
        return AutoChoice(PREFIX_CACHE_STRATEGY, f"{multi} of {len(work)} prompts are conversations regenerated "
                          "each_turn: every later turn resends its history, which the prefix cache reuses", **facts)
    if sample and shared >= SHARED_PREFIX_SHARE * len(sample):
        return AutoChoice(PREFIX_CACHE_STRATEGY, f"{shared} of {len(sample)} prompts share their first "
                          f"{LONG_PREFIX_TOKENS} tokens with another (a common system prompt): the prefix cache "
                          "computes them once", **facts)
    return AutoChoice("no_radix", f"independent single-turn prompts ({shared} of {len(sample)} share their first "
                      f"{LONG_PREFIX_TOKENS} tokens): no prefix to reuse, so one mamba slot per request "
                      "(no_radix) runs the most at once", **facts)
