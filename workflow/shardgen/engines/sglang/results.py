"""What SGLang's Engine is asked for and what it returns, per request: the capture arguments and one output dict as
a Result (the stop token kept, the captured logprobs read from meta_info)."""

from shardgen.capture import Capture
from shardgen.engines import Result


def request_capture_args(capture: Capture | None, mode: str | None) -> dict:
    """A request's capture arguments by what it asks for (Capture.mode): the top k, the chosen token's logprob
    alone for the signal, or nothing."""
    return capture_args(capture) if mode == "tokens" else capture_args(Capture(0)) if mode == "signal" else {}


def capture_args(capture: Capture | None) -> dict:
    """Engine.generate's arguments for capture (none when off): the chosen token's logprob and the top k
    (`top_logprobs_num`; 0 = none), for the output tokens only: `logprob_start_len` -1 is SGLang's "output only"
    (it scores at most the prompt's last position, and keeps the prefix cache's match whole). Token texts are left
    out (`return_text_in_logprobs` stays False). What SGLang reports is log_softmax(logits / temperature) before
    top-k/top-p truncation, as long as SGLANG_RETURN_ORIGINAL_LOGPROB is unset (shardgen.capture says why)."""
    if capture is None:
        return {}
    return {"return_logprob": True, "top_logprobs_num": capture.top_k, "logprob_start_len": -1}


def _captured(meta: dict) -> dict:
    """Result's capture fields from meta_info: `output_token_logprobs` (one (logprob, token_id, text) per output
    token) and `output_top_logprobs` (per output token, a list of such tuples, most likely first; None or empty at
    k 0). Nothing when the request asked for none."""
    chosen = meta.get("output_token_logprobs")
    if chosen is None:
        return {}
    number = lambda x: float("nan") if x is None else float(x)  # noqa: E731
    top = [list(position or ()) for position in meta.get("output_top_logprobs") or [[] for _ in chosen]]
    return {"logprobs": [number(entry[0]) for entry in chosen],
            "top_ids": [[int(entry[1]) for entry in position] for position in top],
            "top_logprobs": [[number(entry[0]) for entry in position] for position in top]}


def result_of(out: dict) -> Result:
    """One SGLang output dict as a Result; the contract keeps the stop token, which SGLang may leave out."""
    meta = out["meta_info"]
    finish = meta.get("finish_reason") or {}
    kind = finish.get("type") if isinstance(finish, dict) else str(finish)
    output_ids = list(out.get("output_ids") or [])
    matched = finish.get("matched") if isinstance(finish, dict) else None
    if kind == "stop" and isinstance(matched, int) and (not output_ids or output_ids[-1] != matched):
        output_ids.append(matched)
    error, reason = None, str(kind)  # stop or length, else an abort with its error
    if kind not in ("stop", "length"):
        error = (finish.get("message") if isinstance(finish, dict) else None) or f"finish_reason {finish!r}"
        reason = "abort"
    return Result(output_ids, out.get("text", ""), reason, meta["prompt_tokens"],
                  meta.get("cached_tokens") or 0, error, **_captured(meta))
