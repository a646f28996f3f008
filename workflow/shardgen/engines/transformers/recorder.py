"""What the CPU engine captures (config `capture`) as HF generate runs: a logits processor that records each step's
logprobs (shardgen/capture.py: what a logprob is) and hands them out per batch row as the Result's capture fields."""


def logprob_recorder(at: float, mode: str, top_k: int):
    """A logits processor that records the capture. HF runs the processors it is given after its own (the
    repetition penalty) and before the warpers (temperature, top-k, top-p, min-p): it sees the logits SGLang's
    sampler starts from, and divides them by the temperature itself (`at`: scoring.temperature, greedy 1). Memory:
    one [batch, vocab] row of logprobs at a time, and `top_k` entries per token. For the signal alone (`mode`
    signal), the chosen token's logprobs only."""
    import torch
    from transformers import LogitsProcessor

    k = top_k if mode == "tokens" else 0

    class Recorder(LogitsProcessor):
        def __init__(self):
            self.chosen, self.top_ids, self.top_logprobs, self.last = [], [], [], None

        def __call__(self, input_ids, scores):
            if self.last is not None:  # the token chosen at the step before is input_ids' last
                self.chosen.append(self.last.gather(1, input_ids[:, -1:]).squeeze(1))
            self.last = torch.log_softmax(scores.float() / at, dim=-1)
            if k:
                values, ids = self.last.topk(min(k, self.last.shape[-1]), dim=-1)
                self.top_ids.append(ids)
                self.top_logprobs.append(values)
            return scores

        def rows(self, sequences) -> list[dict]:
            """Per batch row: the Result capture fields over every step generated (cut to its output later)."""
            if self.last is not None:
                self.chosen.append(self.last.gather(1, sequences[:, -1:]).squeeze(1))
            chosen = torch.stack(self.chosen, 1).tolist() if self.chosen else [[] for _ in sequences]
            steps = len(self.chosen)
            no_top: list[list[list]] = [[[] for _ in range(steps)]] * len(sequences)
            ids = torch.stack(self.top_ids, 1).tolist() if k and steps else no_top
            lps = torch.stack(self.top_logprobs, 1).tolist() if k and steps else ids
            if mode == "signal":  # no top-k lists: capture.signal_only
                return [{"logprobs": c} for c in chosen]
            return [{"logprobs": c, "top_ids": i, "top_logprobs": lp} for c, i, lp in zip(chosen, ids, lps)]

    return Recorder()
