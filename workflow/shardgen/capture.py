"""Capture of the target's distribution on the tokens it generates (config `capture`): what both engines report
(`Result.logprobs`, `top_ids`, `top_logprobs`), how it is aligned with a turn's output_ids, and the per-turn signal
the dataset carries (tables.TURN_SIGNAL).

What a logprob is, in both engines: log_softmax(logits / temperature) over the whole vocabulary, after the logit
penalties and before the top-k/top-p/min-p truncation (SGLang's default, without SGLANG_RETURN_ORIGINAL_LOGPROB;
greedy = temperature 1). So the chosen token's logprob is the model's own at the sampling temperature, and the
top-k are the k most likely tokens of that distribution, never cut by the request's top_k or top_p. The CPU engine
computes it from HF generate's raw logits; it leaves out repetition_penalty (HF applies it in a processor whose
output is already truncated), the one difference, and only where that field is set away from 1."""

import math
from dataclasses import dataclass

from shardgen import ConfigError

MAX_TOP_K = 64  # the schema's maximum for capture.top_k (workflow/schemas/config.schema.yaml says it too)


def captured_sources(every: bool, own: dict[str, bool | None]) -> frozenset[str] | None:
    """The sources a capture covers: with `every` on, all (None) but those whose own setting is false; else those
    whose own setting is true (an empty set: none)."""
    if every:
        left_out = {name for name, captured in own.items() if captured is False}
        return frozenset(own) - left_out if left_out else None
    return frozenset(name for name, captured in own.items() if captured)


@dataclass(frozen=True)
class Capture:
    """What the engine is asked for: for a captured request, the chosen token's logprob and the top `top_k` (0: the
    chosen only); `sources`: the sources whose requests are captured (None: every source). With `signal`, every
    other request asks for the chosen token's logprob alone, for the per-turn signal (nothing per token is kept)."""
    top_k: int
    sources: frozenset[str] | None = None
    signal: bool = False

    @classmethod
    def of(cls, config) -> "Capture | None":
        """The config's capture: `capture.logprobs` for every source, but where a source's own `capture` says
        otherwise, and `capture.signal`; None when neither asks for anything (or a config without the section: a
        test's stand-in)."""
        section = getattr(config, "capture", None)
        if section is None:
            return None
        sources = captured_sources(section.logprobs, {s.name: s.capture for s in config.sources})
        return cls(section.top_k, sources, section.signal) if section.logprobs or sources or section.signal else None

    @classmethod
    def sidecar_of(cls, config) -> "Capture | None":
        """The config's capture where it fills the sidecar (some source captured), None for none or the signal
        alone: what the storage plan sizes."""
        capture = cls.of(config)
        return capture if capture is not None and capture.captures_any else None

    @property
    def captures_any(self) -> bool:
        """Whether some source's turns are captured (not the signal alone)."""
        return self.sources is None or bool(self.sources)

    def wants(self, source: str | None) -> bool:
        """Whether a request of `source` is captured (a request without one: under a global capture only)."""
        return self.sources is None or source in self.sources

    def mode(self, source: str | None) -> str | None:
        """What a request of `source` asks for: `tokens` (captured), `signal` (the chosen token's logprob, for
        the per-turn signal only) or None."""
        return "tokens" if self.wants(source) else "signal" if self.signal else None


def signal_only(result) -> bool:
    """An engine's Result for a request that asked for the signal alone: chosen-token logprobs, no top-k lists
    (a captured request's are there, empty at k 0)."""
    return result.logprobs is not None and result.top_ids is None


def aligned(n: int, logprobs: list | None, top_ids: list | None, top_logprobs: list | None, k: int) -> dict:
    """The part row's capture columns for a turn of `n` output ids: one entry per position, cut to `n` or padded
    at the end (an engine that leaves the stop token out of its logprobs: NaN, and k ids of -1); all null when the
    engine gave nothing (capture off, or an aborted request)."""
    if logprobs is None:
        return {"token_logprobs": None, "top_ids": None, "top_logprobs": None}
    top_ids = [list(ids)[:k] for ids in (top_ids or [])][:n]
    top_logprobs = [list(lps)[:k] for lps in (top_logprobs or [])][:n]
    logprobs = [float(x) for x in logprobs][:n]
    logprobs += [math.nan] * (n - len(logprobs))
    top_ids += [[-1] * k] * (n - len(top_ids))
    top_logprobs += [[math.nan] * k] * (n - len(top_logprobs))
    return {"token_logprobs": logprobs, "top_ids": top_ids, "top_logprobs": top_logprobs}


def turn_signal(token_logprobs: list[float] | None, top_logprobs: list[list[float]] | None) -> dict:
    """tables.TURN_SIGNAL of a turn: mean and minimum chosen-token logprob, and the mean over positions of the
    top-k entropy -sum(p log p) over the k entries (a lower bound of the full entropy, reaching it as k grows;
    null at k 0). Positions an engine left without a value (NaN) are left out."""
    values = [x for x in token_logprobs or () if not math.isnan(x)]
    if not values:
        return {"logprob_mean": None, "logprob_min": None, "topk_entropy_mean": None}
    entropies = [-sum(math.exp(lp) * lp for lp in row if not math.isnan(lp) and lp > -math.inf)
                 for row in top_logprobs or () if row and not math.isnan(row[0])]
    return {"logprob_mean": sum(values) / len(values), "logprob_min": min(values),
            "topk_entropy_mean": sum(entropies) / len(entropies) if entropies else None}


# Hidden states (config `capture.hidden_states`). A layer id is an index of HF's `output_hidden_states`: 0 the
# embeddings, i the input of decoder layer i (SGLang's and vLLM's EAGLE-3 capture takes `hidden_states + residual`
# before layer i: the same vector), L the last after the final norm (what SGLang hands its logits processor:
# SpecForge's offline `hidden_state`, whose trainer applies lm_head alone). LAST_BEFORE_NORM is the final norm's
# input, the last decoder layer's output: what vLLM's extract_hidden_states gives for id L (it appends the residual
# stream before `self.norm`) and speculators' trainer expects as `verifier_last_hidden_states` (it applies its own
# verifier_norm to it).
FP8_MAX = 448.0  # torch.finfo(torch.float8_e4m3fn).max
LAST_BEFORE_NORM = "last_before_norm"


def ordered(ids) -> list:
    """Layer ids as a states file keeps them: each once, ascending, LAST_BEFORE_NORM last; the order SGLang and vLLM
    capture in, so a trainer told the ids in order reads the layers it was told."""
    indices = sorted({i for i in ids if i != LAST_BEFORE_NORM})
    return indices + [LAST_BEFORE_NORM] * (LAST_BEFORE_NORM in ids)


def named_layers(name: str, num_layers: int) -> list:
    """A named layer set for a model of `num_layers` decoder layers, ordered. eagle3: SGLang 0.5.17's
    `set_eagle3_layers_to_capture` default (models/llama.py: [2, L//2, L-3]) and speculators 0.9.0's
    `resolve_target_layer_ids`, then L (SpecForge's last) and LAST_BEFORE_NORM (speculators'); dflash: SpecForge
    0.2.0's auto-generated DFlash draft (`build_target_layer_ids(L, 1)` = [L//2], a layer output, which is index
    L//2 + 1) and LAST_BEFORE_NORM (speculators' DFlash splits it off as its last; SpecForge's DFlash takes none).
    A model of 6 layers or fewer repeats ids in the eagle3 rule (4 layers: [2, 2, 1]): each is kept once."""
    if name == "eagle3":
        return ordered([2, num_layers // 2, num_layers - 3, num_layers, LAST_BEFORE_NORM])
    return ordered([num_layers // 2 + 1, LAST_BEFORE_NORM])


@dataclass(frozen=True)
class HiddenCapture:
    """What the engine is asked for per request: the hidden states at `layers` (config value: a name or ids) for
    every position of the turn, kept in `dtype`; `sources`: the captured sources (None: every source)."""
    layers: str | tuple[int | str, ...]
    dtype: str
    sources: frozenset[str] | None = None

    @classmethod
    def of(cls, config) -> "HiddenCapture | None":
        """`capture.hidden_states` for every source but where a source's own `hidden_states` says otherwise; None
        when no source is captured (or a config without the section)."""
        section = getattr(getattr(config, "capture", None), "hidden_states", None)
        if section is None:
            return None
        sources = captured_sources(section.enabled, {s.name: s.hidden_states for s in config.sources})
        layers = section.layers if isinstance(section.layers, str) else tuple(section.layers)
        return cls(layers, section.dtype, sources) if section.enabled or sources else None

    def wants(self, source: str | None) -> bool:
        return self.sources is None or source in self.sources

    def header(self, num_layers: int) -> dict:
        """What a part's states file says of them (store/hidden.py), and merge needs to tell the layers' roles apart
        (merge/hidden_exports.py): the layer ids, L and the layer set."""
        return {"layers": self.layer_ids(num_layers), "num_layers": num_layers,
                "layer_set": self.layers if isinstance(self.layers, str) else "explicit"}

    def layer_ids(self, num_layers: int) -> list:
        """The output_hidden_states indices (and LAST_BEFORE_NORM) for a model of `num_layers` decoder layers,
        ordered (an explicit list too); an id past L is a config error."""
        ids = named_layers(self.layers, num_layers) if isinstance(self.layers, str) else ordered(self.layers)
        if too_high := [i for i in ids if i != LAST_BEFORE_NORM and i > num_layers]:
            raise ConfigError(f"capture.hidden_states.layers: {too_high} past the model's last index {num_layers} "
                              f"(the model has {num_layers} decoder layers; 0 is the embeddings, {num_layers} the "
                              "last after the final norm)")
        return ids

    def bytes_per_token(self, num_layers: int, hidden_size: int) -> int:
        """What one position costs on disk: a value per layer and unit, plus the fp8 scale."""
        values = len(self.layer_ids(num_layers)) * hidden_size
        return values * 2 if self.dtype == "bfloat16" else values + 4

    def encode(self, states) -> dict:
        """A turn's states ([positions, layers, hidden], any float dtype) as stored: `states` in bfloat16, or in
        float8_e4m3fn with `scale` (float32 [positions, 1, 1]: amax / 448 per position, hs_connectors' layout)."""
        import torch

        if self.dtype == "bfloat16":
            return {"states": states.to(torch.bfloat16).contiguous()}
        values = states.float()
        scale = (values.abs().amax(dim=(1, 2), keepdim=True) / FP8_MAX).clamp(min=1e-12)
        return {"states": (values / scale).to(torch.float8_e4m3fn).contiguous(), "scale": scale.contiguous()}


def decoded(stored: dict, dtype=None):
    """A stored turn's states back as floats (`dtype`, default float32): fp8 values times their scale."""
    import torch

    dtype = dtype or torch.float32
    states = stored["states"].to(dtype)
    return states * stored["scale"].to(dtype) if "scale" in stored else states
