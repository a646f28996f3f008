"""Prefill-only scoring, what `shardgen audit` asks an engine (`Engine.score`): a turn's generated tokens scored
after its exact prompt in one forward pass, each position's distribution as capture defines it at generation
(shardgen/capture.py: log_softmax(logits / temperature) over the whole vocabulary, greedy at temperature 1)."""

from dataclasses import dataclass


@dataclass(frozen=True)
class ScoreRequest:
    rid: str
    context_ids: list[int]  # the turn's exact prompt (its prompt_ids)
    target_ids: list[int]  # the tokens scored after it (the turn's output_ids)
    sampling: dict  # the turn's sampling: its temperature scales the logits


@dataclass(frozen=True)
class Scores:
    """Per target position: the target token's logprob, the most likely token, and the top k, most likely first;
    all at `temperature`, the request's where the engine can scale a prefill's logits by it, else 1 (SGLang)."""
    logprobs: list[float]
    argmax_ids: list[int]
    top_ids: list[list[int]]
    top_logprobs: list[list[float]]
    temperature: float


def temperature(sampling: dict) -> float:
    """The temperature the logprobs are taken at: the request's, greedy (0) or unrecorded (None) at 1."""
    return sampling.get("temperature") or 1.0
