"""A model's shape from its config.json: its layers, weights, the Mamba state one request holds and the KV cache one
token takes. What an engine's memory pools hold (sglang/running_cap.py) and what a decode step moves (report/roofline)
are both built on it. Nemotron-H layer patterns (M mamba2, * attention, - MLP, E MoE); a config without a pattern
is read as a plain decoder (every layer attention + gated MLP). Norms and biases are left out (under 0.1%)."""

import json
from dataclasses import dataclass
from pathlib import Path

from shardgen import ShardgenError
from shardgen.engines import RunSettings

DTYPE_BYTES = {"float32": 4, "fp32": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "half": 2, "fp16": 2,
               "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8": 1}
CONV_STATE_BYTES = 2  # SGLang keeps the conv state in bf16 (SGLANG_MAMBA_CONV_DTYPE)


class ModelConfigError(ShardgenError, ValueError):
    pass


@dataclass(frozen=True)
class ModelShape:
    cfg: dict

    @classmethod
    def from_dir(cls, folder: Path):
        path = Path(folder) / "config.json"
        if not path.is_file():
            raise ModelConfigError(f"{folder}: no config.json, so no model shape (give --model MODEL_DIR)")
        return cls(json.loads(path.read_text()))

    def get(self, *names, default=None):
        return next((self.cfg[n] for n in names if self.cfg.get(n) is not None), default)

    @property
    def pattern(self) -> str:
        pattern = self.get("hybrid_override_pattern")
        return pattern or "*" * self.get("num_hidden_layers")

    def decoder_size(self) -> tuple[int | None, int | None]:
        """The decoder layers and hidden size (a multimodal config's text part), None where config.json has none:
        what a hidden state's layer ids and bytes are counted in."""
        text = self.cfg.get("text_config") or {}
        return (self.get("num_hidden_layers", default=text.get("num_hidden_layers")),
                self.get("hidden_size", default=text.get("hidden_size")))

    @property
    def is_hybrid(self) -> bool:
        """A Nemotron-H layer pattern with Mamba layers: a model whose requests each hold a Mamba state."""
        return "M" in (self.get("hybrid_override_pattern") or "")

    def dtypes(self, settings: RunSettings) -> dict:
        """What the engine runs with: weights, KV cache and SSM state as the run set them, else the model config's
        (`torch_dtype`; the weights' for the KV cache; `mamba_ssm_dtype`, else SGLang's default float32)."""
        def native(*keys, default):
            return str(self.get(*keys, default=default)).removeprefix("torch.")

        weights = settings.weights_dtype or native("torch_dtype", "dtype", default="bfloat16")
        return {"weights": weights, "kv": settings.kv_cache_dtype or weights,
                "ssm_state": settings.ssm_state_dtype or native("mamba_ssm_dtype", default="float32")}

    def _mamba(self) -> tuple[int, int, int]:
        """(SSM state elements, conv_dim, conv kernel) of one Mamba2 layer."""
        heads, head_dim = self.get("mamba_num_heads"), self.get("mamba_head_dim")
        state, groups = self.get("ssm_state_size"), self.get("n_groups", "mamba_n_groups", default=8)
        conv_dim = heads * head_dim + 2 * groups * state
        return heads * head_dim * state, conv_dim, self.get("conv_kernel", "mamba_d_conv", default=4)

    def layer_weights(self, kind: str) -> tuple[int, int]:
        """(active, total) matmul weights of one layer."""
        hidden = self.get("hidden_size")
        if kind == "M":
            heads, inner = self.get("mamba_num_heads"), self.get("mamba_num_heads") * self.get("mamba_head_dim")
            state_elems, conv_dim, kernel = self._mamba()
            in_proj = hidden * (inner + conv_dim + heads)  # z, then x|B|C (the conv input), then dt
            n = in_proj + conv_dim * kernel + inner * hidden
            return n, n
        if kind == "*":
            head_dim = self.get("head_dim", default=hidden // self.get("num_attention_heads"))
            q, kv = self.get("num_attention_heads") * head_dim, self.get("num_key_value_heads") * head_dim
            n = 2 * hidden * q + 2 * hidden * kv
            return n, n
        if kind == "-":
            n = 2 * hidden * self.get("intermediate_size")  # relu2 up + down (Nemotron-H MLPs are not gated)
            return n, n
        if kind == "E":
            expert = 2 * hidden * self.get("moe_intermediate_size")
            shared = self.get("n_shared_experts", default=0) * 2 * hidden * self.get(
                "moe_shared_expert_intermediate_size", default=0)
            router = hidden * self.get("n_routed_experts")
            return (self.get("num_experts_per_tok") * expert + shared + router,
                    self.get("n_routed_experts") * expert + shared + router)
        raise ModelConfigError(f"config.json: layer kind {kind!r} in the pattern is not understood")

    def weights(self) -> tuple[int, int]:
        """(active, total) matmul weights, the LM head included; a plain decoder's MLP is gated (3 matrices)."""
        lm_head = self.get("hidden_size") * self.get("vocab_size")
        if not self.get("hybrid_override_pattern"):
            attn = self.layer_weights("*")[0]
            n = self.get("num_hidden_layers") * (attn + 3 * self.get("hidden_size") * self.get("intermediate_size"))
            return n + lm_head, n + lm_head
        pairs = [self.layer_weights(k) for k in self.pattern]
        return sum(a for a, _ in pairs) + lm_head, sum(t for _, t in pairs) + lm_head

    def resident_weights(self) -> int:
        """Weights held in GPU memory: every matmul weight, and the embedding table unless the LM head shares it
        (a decode step reads one row of it, so `weights` leaves it out)."""
        tied = self.get("tie_word_embeddings", default=False)
        return self.weights()[1] + (0 if tied else self.get("hidden_size") * self.get("vocab_size"))

    def state_bytes_per_request(self, ssm_bytes: int) -> int:
        state_elems, conv_dim, kernel = self._mamba() if "M" in self.pattern else (0, 0, 1)
        return self.pattern.count("M") * (state_elems * ssm_bytes + conv_dim * (kernel - 1) * CONV_STATE_BYTES)

    def kv_bytes_per_token(self, kv_bytes: int) -> int:
        head_dim = self.get("head_dim", default=self.get("hidden_size") // self.get("num_attention_heads"))
        return self.pattern.count("*") * 2 * self.get("num_key_value_heads") * head_dim * kv_bytes
