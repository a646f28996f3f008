"""The fake scheduler's model for forward hooks (ServerArgs.forward_hooks): NemotronH's module names and call
structure in SGLang 0.5.17 (models/nemotron_h.py), without weights. The model and each decoder layer are called
through `.forward` (no hook fires on them, nemotron_h.py:857 and :1079); the embeddings, every norm and the logits
processor through `__call__`. A layer's input norm adds into the residual in place and returns (normed, residual),
as sgl_kernel's fused_add_rmsnorm; each Mamba mixer has a norm of its own (model.layers.<i>.mixer.norm).

Its numbers, deterministic: the embedding of token t is t + d / hidden in dimension d; layer j's mixer outputs
position + 1 whatever its input, so the input of layer i (HF's output_hidden_states[i]) is the embedding +
i (position + 1); every norm doubles; id L is the final norm's output, twice the last layer's stream."""

import torch
from torch import nn


def stream(ids: list[int], layer: int, hidden: int) -> torch.Tensor:
    """float32 [positions, hidden]: the residual stream before decoder layer `layer` (0: the embeddings)."""
    positions = torch.arange(len(ids), dtype=torch.float32)[:, None]
    return torch.tensor(ids, dtype=torch.float32)[:, None] + torch.arange(hidden) / hidden + layer * (positions + 1)


class Embedding(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.hidden = hidden

    def forward(self, input_ids):
        return input_ids.float()[:, None] + torch.arange(self.hidden) / self.hidden


class Norm(nn.Module):
    def forward(self, x, residual=None):
        if residual is None:
            return x * 2
        residual.add_(x)
        x.copy_(residual * 2)
        return x, residual


class Mixer(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = Norm()

    def forward(self, x, positions):
        return self.norm(x) * 0 + (positions.float()[:, None] + 1)


class DecoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm, self.mixer = Norm(), Mixer()

    def forward(self, *, hidden_states, residual, positions):
        if residual is None:
            residual, hidden_states = hidden_states, self.norm(hidden_states)
        else:
            hidden_states, residual = self.norm(hidden_states, residual)
        return self.mixer.forward(hidden_states, positions), residual


class Model(nn.Module):
    def __init__(self, layers: int, hidden: int):
        super().__init__()
        self.embed_tokens, self.norm_f = Embedding(hidden), Norm()
        self.layers = nn.ModuleList(DecoderLayer() for _ in range(layers))

    def forward(self, input_ids, positions):
        hidden_states, residual = self.embed_tokens(input_ids), None
        for layer in self.layers:
            hidden_states, residual = layer.forward(hidden_states=hidden_states, residual=residual,
                                                    positions=positions)
        hidden_states, _ = self.norm_f(hidden_states, residual)
        return hidden_states


class LogitsProcessor(nn.Module):
    def forward(self, input_ids, hidden_states, lm_head, forward_batch):
        return hidden_states.sum(dim=-1)


class ForCausalLM(nn.Module):
    def __init__(self, layers: int, hidden: int):
        super().__init__()
        self.model, self.logits_processor = Model(layers, hidden), LogitsProcessor()

    def forward(self, input_ids, positions, forward_batch):
        hidden_states = self.model.forward(input_ids, positions)
        return self.logits_processor(input_ids, hidden_states, None, forward_batch)


class Mode:
    def __init__(self, extend: bool):
        self.extend = extend

    def is_extend(self) -> bool:
        return self.extend


class ForwardBatch:
    """What the hooks read of SGLang's ForwardBatch (forward_batch_info.py:417-536): the mode, each row's rid, the
    positions it starts at and how many it extends by."""

    def __init__(self, extend: bool, rows: list[tuple[str, int, int]]):
        self.forward_mode = Mode(extend)
        self.rids = [rid for rid, _, _ in rows]
        self.extend_prefix_lens_cpu = [start for _, start, _ in rows]
        self.extend_seq_lens_cpu = [n for _, _, n in rows]


def run(model: ForCausalLM, rows: list[tuple[str, list[int], int]], extend: bool) -> None:
    """One forward over `rows` (rid, the whole sequence's ids, the first position run): each row's positions from
    its start on (decode: the last one)."""
    spans = [(rid, ids, start if extend else len(ids) - 1) for rid, ids, start in rows]
    input_ids = torch.tensor([t for _, ids, start in spans for t in ids[start:]])
    positions = torch.tensor([p for _, ids, start in spans for p in range(start, len(ids))])
    batch = ForwardBatch(extend, [(rid, start, len(ids) - start) for rid, ids, start in spans])
    with torch.inference_mode():
        model.forward(input_ids, positions, batch)
