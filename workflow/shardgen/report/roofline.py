"""Decode-step cost of a model from its config.json: FLOPs (2 x the active weights per token, plus attention over
the context and the SSM update) and bytes moved (the weights once per step, the KV cache read by attention layers,
the Mamba conv and SSM state read and written by Mamba layers). Norms, biases and the embedding lookup are left
out (under 0.1% of either). The layers, weights and state sizes are the model's shape (engines/model_shape.py)."""

from shardgen.engines.model_shape import ModelShape


class Model(ModelShape):
    """A model's shape (engines/model_shape.py) and the cost of one decode step."""

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
