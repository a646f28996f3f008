"""Prefill-only scoring on SGLang (SGLangEngine.score): each turn's prompt and answer sent as one prompt with
max_new_tokens 1 (the one token generated is ignored; 0 is not verified on our SGLang version), its input tokens'
logprobs asked from the prompt's last position on, and read back from meta_info.

A prefill's logprobs are at temperature 1, whatever the request's: SGLang's LogitsProcessor scales input logits by
the temperature only under LogitsMetadata.temp_scaled_logprobs, which no request sets (RL frameworks patch SGLang
for it). Its generation-time logprobs are at the sampling temperature (shardgen.capture), so the two compare
directly only for turns generated at temperature 1 or greedy; Scores.temperature says which."""

from shardgen.engines.scoring import ScoreRequest, Scores

PREFILL_TEMPERATURE = 1.0

CHUNK = 64  # requests per Engine.generate call: what one call holds in memory stays bounded


def chunks(requests: list[ScoreRequest]) -> list[list[ScoreRequest]]:
    return [requests[i:i + CHUNK] for i in range(0, len(requests), CHUNK)]


def generate_args(requests: list[ScoreRequest], top_k: int) -> dict:
    """Engine.generate's arguments for a batch of score requests: the logprobs are taken before any sampling, and
    the one token sampled is thrown away."""
    return {"input_ids": [r.context_ids + r.target_ids for r in requests],
            "sampling_params": [{"max_new_tokens": 1} for _ in requests],
            "return_logprob": True, "logprob_start_len": [len(r.context_ids) - 1 for r in requests],
            "top_logprobs_num": max(top_k, 1)}  # the top 1 is the argmax


def scores_of(request: ScoreRequest, meta: dict, top_k: int) -> Scores:
    """A score request's Scores from its output's meta_info: `input_token_logprobs` ((logprob, token_id, text) per
    input position from logprob_start_len on; SGLang may give the first without a logprob, or an entry more or
    less at the start) and `input_top_logprobs` (per position, such tuples, most likely first). Read from the end:
    the last len(target) entries must carry the target's ids, else SGLang aligns them otherwise than assumed."""
    n = len(request.target_ids)
    chosen = list(meta.get("input_token_logprobs") or ())[-n:]
    top = list(meta.get("input_top_logprobs") or ())[-n:]
    ids = [entry[1] if entry else None for entry in chosen]
    if ids != request.target_ids or len(top) != n:
        raise RuntimeError(f"{request.rid}: SGLang's input logprobs do not end with the target's {n} tokens (their "
                           f"ids {ids[:8]}..., the target's {request.target_ids[:8]}..., {len(top)} top-logprob "
                           "rows): its alignment differs from the one shardgen's SGLang scoring assumes")
    if any(entry[0] is None for entry in chosen):
        raise RuntimeError(f"{request.rid}: SGLang gave a target token no logprob (logprob_start_len too late)")
    top = [list(position or ()) for position in top]
    if not all(top):
        raise RuntimeError(f"{request.rid}: SGLang gave a target position no top logprobs (top_logprobs_num "
                           "asked: at least 1), so it has no argmax")
    return Scores([float(entry[0]) for entry in chosen], [int(position[0][1]) for position in top],
                  [[int(entry[1]) for entry in position[:top_k]] for position in top],
                  [[float(entry[0]) for entry in position[:top_k]] for position in top], PREFILL_TEMPERATURE)
