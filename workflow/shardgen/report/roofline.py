"""Decode-step cost of a model from its config.json: FLOPs (2 x the active weights per token, plus attention over
the context and the SSM update) and bytes moved (the weights once per step, the KV cache read by attention layers,
the Mamba conv and SSM state read and written by Mamba layers). Norms, biases and the embedding lookup are left
out (under 0.1% of either). Nemotron-H layer patterns (M mamba2, * attention, - MLP, E MoE); a config without a
pattern is read as a plain decoder (every layer attention + gated MLP)."""

import json
from dataclasses import dataclass
from pathlib import Path

from shardgen import ShardgenError

DTYPE_BYTES = {"float32": 4, "fp32": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "half": 2, "fp16": 2,
               "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8": 1}
CONV_STATE_BYTES = 2  # SGLang keeps the conv state in bf16 (SGLANG_MAMBA_CONV_DTYPE)


class ModelConfigError(ShardgenError, ValueError):
    pass


@dataclass(frozen=True)
class Model:
    cfg: dict

    @classmethod
    def from_dir(cls, folder: Path) -> "Model":
        path = Path(folder) / "config.json"
        if not path.is_file():
            raise ModelConfigError(f"{folder}: no config.json, so no roofline (give --model MODEL_DIR)")
        return cls(json.loads(path.read_text()))

    def get(self, *names, default=None):
        return next((self.cfg[n] for n in names if self.cfg.get(n) is not None), default)

    @property
    def pattern(self) -> str:
        pattern = self.get("hybrid_override_pattern")
        return pattern or "*" * self.get("num_hidden_layers")

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

    def state_bytes_per_request(self, ssm_bytes: int) -> int:
        state_elems, conv_dim, kernel = self._mamba() if "M" in self.pattern else (0, 0, 1)
        return self.pattern.count("M") * (state_elems * ssm_bytes + conv_dim * (kernel - 1) * CONV_STATE_BYTES)

    def kv_bytes_per_token(self, kv_bytes: int) -> int:
        head_dim = self.get("head_dim", default=self.get("hidden_size") // self.get("num_attention_heads"))
        return self.pattern.count("*") * 2 * self.get("num_key_value_heads") * head_dim * kv_bytes

    def flops_per_token(self, context: float) -> float:
        head_dim = self.get("head_dim", default=self.get("hidden_size") // self.get("num_attention_heads"))
        attention = self.pattern.count("*") * 4 * self.get("num_attention_heads") * head_dim * context  # QK^T, AV
        ssm = self.pattern.count("M") * 5 * self._mamba()[0] if "M" in self.pattern else 0  # h=dA*h+dB*x, y=C*h
        return 2 * self.weights()[0] + attention + ssm

    def decode_step(self, batch: int, context: float, weight_bytes: int, kv_bytes: int, ssm_bytes: int) -> dict:
        """FLOPs and bytes of one decode step of `batch` requests with `context` tokens each on average."""
        return {"flops": batch * self.flops_per_token(context),
                "bytes": {"weights": self.weights()[1] * weight_bytes,
                          "kv": batch * (context + 1) * self.kv_bytes_per_token(kv_bytes),  # read all, write one
                          "state": 2 * batch * self.state_bytes_per_request(ssm_bytes)}}  # read and write
