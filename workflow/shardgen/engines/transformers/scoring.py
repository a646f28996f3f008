"""Prefill-only scoring on the Hugging Face model (the CPU engine's `score`): one forward pass over context and
target per request, the logits at the positions that predict the target, in float32 as the capture at generation
reads them (TransformersEngine._recorder), one request at a time: no padding to change the numbers."""

from shardgen.engines.scoring import ScoreRequest, Scores, temperature


def score(model, requests: list[ScoreRequest], top_k: int, device: str) -> list[Scores]:
    import torch

    scored = []
    for request in requests:
        ids = torch.tensor([request.context_ids + request.target_ids], device=device)
        with torch.inference_mode():
            # the logits at position i predict token i + 1: context's last ... target's second to last
            logits = model(ids, use_cache=False).logits[0, len(request.context_ids) - 1:-1]
        at = temperature(request.sampling)
        logprobs = torch.log_softmax(logits.float() / at, dim=-1)
        target = torch.tensor(request.target_ids, device=device)
        values, top = logprobs.topk(max(top_k, 1), dim=-1)
        scored.append(Scores(logprobs.gather(1, target[:, None]).squeeze(1).tolist(), top[:, 0].tolist(),
                             top[:, :top_k].tolist(), values[:, :top_k].tolist(), at))
    return scored
