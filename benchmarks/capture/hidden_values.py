"""The hidden states shardgen captures on SGLang against SGLang's own, on one GPU, and why layer L is small on dummy
weights.

    python benchmarks/capture/hidden_values.py --config W/config.yaml --out hidden_values.json [--turns 16]

W/config.yaml: a workload (variable_length.py make) with `capture.hidden_states` on (the eagle3 set, which holds L
and last_before_norm). One engine, started with `enable_return_hidden_states`; for each of `--turns` prompts a
greedy generation that asks SGLang's own hidden states (`return_hidden_states`: layer L, what its logits processor
is given, for the prompt's positions in the prefill and one position per decode step), then shardgen's capture pass
over the same prompt + output ids (engines/sglang/hidden.py). Per turn: the largest difference between the two at
the prompt's positions (both from a prefill) and at the generated ones (SGLang's from decode steps, shardgen's from
one prefill: other kernels), each against bfloat16's rounding of the values (2^-8 of the largest magnitude).

Layer L's scale: SGLang's dummy weights are uniform in [-1e-3, 1e-3] (norm weights too), so the residual stream
stays ~6e-4 and its mean square (~3e-7) is far below the RMS norm's epsilon (1e-5): the final norm divides by
sqrt(eps) ~ 3.2e-3 instead of the stream's own RMS, then multiplies by weights of std 1e-3/sqrt(3). The script
predicts L's standard deviation from the captured last_before_norm that way and prints both.
"""

import argparse
import asyncio
import json
import math
import sys
from datetime import datetime, timezone
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))  # variable_length: the workload's inputs
from variable_length import prepare_inputs  # noqa: E402

from shardgen.capture import LAST_BEFORE_NORM, decoded  # noqa: E402
from shardgen.config import Config  # noqa: E402
from shardgen.engines import Request  # noqa: E402
from shardgen.engines.sglang.results import result_of  # noqa: E402
from shardgen.layout import Layout  # noqa: E402

DUMMY_WEIGHT_STD = 1e-3 / math.sqrt(3)  # uniform in [-1e-3, 1e-3]: SGLang's load_format dummy


def as_rows(hidden):
    """SGLang's meta_info hidden_states (the prefill's [positions, H], then one [H] or [1, H] per decode step) as
    one [positions, H] float tensor."""
    import torch

    parts = [torch.tensor(part, dtype=torch.float32) for part in hidden]
    return torch.cat([p.reshape(-1, p.shape[-1]) for p in parts])


def compare(own, captured, prompt_len: int) -> dict:
    """SGLang's rows against the captured ones at the same positions, prompt and generated apart."""
    n = min(len(own), len(captured))
    diff = (own[:n] - captured[:n]).abs()
    rounding = 2.0 ** -8 * float(captured[:n].abs().max())
    spans = {"prompt": slice(0, min(prompt_len, n)), "generated": slice(min(prompt_len, n), n)}
    return {"positions": n, "rounding": rounding,
            **{f"{name}_max_diff": float(diff[span].max()) if span.stop > span.start else None
               for name, span in spans.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--turns", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    args = ap.parse_args()
    import torch
    from shardgen.engines.session import open_engine

    raw = Config.from_file(args.config).raw
    engine_section = {**raw["engine"], "args": {**raw["engine"].get("args", {}), "enable_return_hidden_states": True}}
    bench = Layout(Path(str(raw["results_dir"]) + "-values"))
    config = Config.from_dict({**raw, "engine": engine_section, "results_dir": str(bench.root)})
    rows = pq.read_table(prepare_inputs(config).split(0)).to_pylist()[:args.turns]
    result: dict = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "turns": []}
    model_config = json.loads((Path(config.model.path) / "config.json").read_text())
    eps = float(model_config.get("layer_norm_epsilon") or model_config.get("rms_norm_eps") or 1e-5)

    with open_engine(config, config.target_model, bench.root / "engine", work=rows) as engine:
        sglang, capture = engine.engine, engine.hidden
        layers = capture.layer_ids
        last, before = layers.index(capture.num_layers), layers.index(LAST_BEFORE_NORM)

        async def one(i: int, row: dict) -> dict:
            out = await sglang.async_generate(input_ids=row["prompt_ids"], rid=f"values-{i}",
                                              sampling_params={"max_new_tokens": args.max_new_tokens,
                                                               "temperature": 0.0},
                                              return_hidden_states=True)
            generated = result_of(out)
            await capture.attach(sglang, Request(f"values-{i}", row["prompt_ids"], {}, row["source"]), generated)
            states = decoded(generated.hidden_states, torch.float32)
            x = states[:, before]
            predicted = (x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)).std() * DUMMY_WEIGHT_STD
            return {**compare(as_rows(out["meta_info"]["hidden_states"]), states[:, last], len(row["prompt_ids"])),
                    "std_by_layer": {str(k): float(states[:, j].std()) for j, k in enumerate(layers)},
                    "stream_mean_square": float(x.pow(2).mean()), "predicted_last_std": float(predicted)}

        async def every_turn() -> list[dict]:
            return list(await asyncio.gather(*(one(i, row) for i, row in enumerate(rows))))

        result["turns"] = engine.run(every_turn())
        result["engine"] = engine.info.record
    turns = result["turns"]
    result["summary"] = {
        "turns": len(turns), "layers": [str(k) for k in layers], "norm_eps": eps,
        "prompt_max_diff": max(t["prompt_max_diff"] or 0.0 for t in turns),
        "generated_max_diff": max(t["generated_max_diff"] or 0.0 for t in turns),
        "rounding_min": min(t["rounding"] for t in turns),
        "within_rounding_prompt": sum((t["prompt_max_diff"] or 0.0) <= t["rounding"] for t in turns),
        "within_rounding_generated": sum((t["generated_max_diff"] or 0.0) <= t["rounding"] for t in turns),
        "last_std_mean": sum(t["std_by_layer"][str(capture.num_layers)] for t in turns) / len(turns),
        "predicted_last_std_mean": sum(t["predicted_last_std"] for t in turns) / len(turns)}
    args.out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(json.dumps(result["summary"]))


if __name__ == "__main__":
    main()
