"""The audit's figures, pure functions of token ids and logprobs: per turn (tables.AUDIT_TURNS) and per setting.
Fractions are over generated tokens (a long turn weighs more than a short one); a logprob difference is taken
where both sides have a value (an engine may leave a position without one: NaN) at the same temperature (a scored
turn's `temperature`: SGLang scores a prefill at 1, so a turn sampled at another has no difference to generation
time there; its argmax and top-k, which a temperature does not reorder, still count) and without a repetition
penalty (SGLang's generation-time logprobs come after it, a prefill's never do)."""

import math

import numpy as np

from shardgen.engines.scoring import temperature


def generation_logprobs(turn: dict, scores: dict) -> list[float] | None:
    """The turn's generation-time logprobs where they compare with its scores (the same temperature, no repetition
    penalty), else None."""
    same = math.isclose(temperature({"temperature": turn.get("temperature")}), scores["temperature"])
    unpenalized = turn.get("repetition_penalty") in (None, 1.0)
    return turn["token_logprobs"] if same and unpenalized else None


def fraction(flags: list[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def abs_diffs(first: list[float] | None, second: list[float] | None) -> list[float]:
    """|first - second| per position both have a value; none when either side has no logprobs."""
    if first is None or second is None:
        return []
    return [abs(a - b) for a, b in zip(first, second) if not (math.isnan(a) or math.isnan(b))]


def spread(diffs: list[float]) -> dict | None:
    """mean, 99th percentile (linear between ranks) and maximum of absolute differences; None without any."""
    if not diffs:
        return None
    values = np.asarray(diffs, dtype=np.float64)
    return {"mean_abs": float(values.mean()), "p99_abs": float(np.quantile(values, 0.99)),
            "max_abs": float(values.max())}


def matches(output_ids: list[int], scores: dict, top_k: int) -> tuple[list[bool], list[bool]]:
    """Per generated token: whether it is the re-scored argmax, and whether it is in the re-scored top k."""
    argmax = [token == best for token, best in zip(output_ids, scores["argmax_ids"])]
    in_top = [token in ids[:top_k] for token, ids in zip(output_ids, scores["top_ids"])]
    return argmax, in_top


def turn_row(setting: str, turn: dict, scores: dict, top_k: int) -> dict:
    """A tables.AUDIT_TURNS row: the sampled turn (its output_ids and generation-time token_logprobs) under a
    setting's scores."""
    argmax, in_top = matches(turn["output_ids"], scores, top_k)
    diffs = abs_diffs(scores["logprobs"], generation_logprobs(turn, scores))
    return {"setting": setting, "conversation_id": turn["conversation_id"], "turn": turn["turn"],
            "gen_key": turn["gen_key"], "tokens": len(turn["output_ids"]), "argmax_match": fraction(argmax),
            "in_top_k": fraction(in_top), "logprob_diff_mean_abs": sum(diffs) / len(diffs) if diffs else None,
            "logprob_diff_max_abs": max(diffs) if diffs else None,
            "first_argmax_mismatch": next((i for i, same in enumerate(argmax) if not same), None)}


def setting_figures(turns: list[dict], scores: list[dict], top_k: int, own: list[dict] | None) -> dict:
    """A setting's figures over the sample (its scores in the sample's order): tokens, argmax_match, in_top_k,
    logprob_diff against generation time (None: no turn was captured, or none at its scores' temperature;
    `compared_turns` counts those that were) and, given `own`'s scores, versus_own (turns both scored at one
    temperature)."""
    argmax, in_top, diffs, captured, compared = [], [], [], 0, 0
    for turn, scored in zip(turns, scores, strict=True):
        same, top = matches(turn["output_ids"], scored, top_k)
        argmax += same
        in_top += top
        at_generation = generation_logprobs(turn, scored)
        diffs += abs_diffs(scored["logprobs"], at_generation)
        captured += turn["token_logprobs"] is not None
        compared += at_generation is not None
    figures = {"turns": len(turns), "tokens": len(argmax), "captured_turns": captured, "compared_turns": compared,
               "argmax_match": fraction(argmax), "in_top_k": fraction(in_top), "logprob_diff": spread(diffs)}
    if own is not None:
        figures["versus_own"] = spread([d for mine, theirs in zip(scores, own, strict=True)
                                        if math.isclose(mine["temperature"], theirs["temperature"])
                                        for d in abs_diffs(mine["logprobs"], theirs["logprobs"])])
    return figures


def most_drift(rows: list[dict], n: int = 5) -> list[dict]:
    """The `n` turns that drift most: by their mean logprob difference to generation time where they were captured,
    else by the share of their tokens that are not the argmax."""
    def drift(row):
        captured = row["logprob_diff_mean_abs"] is not None
        return (captured, row["logprob_diff_mean_abs"] if captured else 1 - row["argmax_match"])
    return sorted(rows, key=drift, reverse=True)[:n]
