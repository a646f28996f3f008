"""What hidden-state capture (config `capture.hidden_states`) costs on the CPU demo, and whether the bytes it
writes match the forecast (HiddenCapture.bytes_per_token: layers x hidden x 2 for bfloat16, + a 4-byte scale per
position for fp8).

    python benchmarks/capture/hidden_states_cpu.py --workdir /tmp/hs --rows 32 --save hidden_states_cpu.json

Arms, each a fresh results folder over the same prompts (greedy, the same tokens in every arm): off, bfloat16,
float8_e4m3fn, at the eagle3 layer set. A warm-up arm first (discarded: the process's first forward pays for
torch's own start), then each arm twice, in one order and its reverse, so drift on a shared machine falls on every
arm alike. Per run: output tokens, the wall from the engine's `engine_started` event to the shard's end (model
load and engine start excluded), output tok/s; per arm the mean of its two runs and, with capture: positions
captured (prompt + output of every turn), bytes of part-*.hidden.safetensors, bytes per position measured and
forecast, and their ratio. One process on a 2-core machine shared with other work: the tok/s are rough."""

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path

import pyarrow.parquet as pq
import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "workflow"))

from shardgen.capture import HiddenCapture  # noqa: E402
from shardgen.config import Config  # noqa: E402
from shardgen.generate.shard import generate_shard  # noqa: E402
from shardgen.layout import Layout, attempts_path, hidden_part_files  # noqa: E402
from shardgen.model.demo import build  # noqa: E402
from shardgen.prompts.split import split  # noqa: E402
from shardgen.prompts.stage import build_prompts  # noqa: E402


def arm(workdir: Path, model: Path, rows: int, hidden: dict, run: str) -> dict:
    name = hidden.get("dtype", "off") if hidden else "off"
    source = workdir / "q.jsonl"
    source.write_text("".join(json.dumps({"query": f"Tell me about number {i} and {i * 7}."}) + "\n"
                              for i in range(rows)))
    raw = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    raw.update(results_dir=str(workdir / f"{name}-{run}"), shards=1, sources=[
        {"name": "q", "path": str(source), "format": "query_response",
         "sampling": {"temperature": 0.0, "max_new_tokens": 32}}])
    raw["model"]["path"] = str(model)
    raw["capture"] = {**raw.get("capture", {}), "hidden_states": hidden}
    config = Config.from_dict(raw)
    layout = Layout(config.results)
    build_prompts(config, layout.prompts_dir)
    split(layout.prompts, layout.split_dir, 1)
    generate_shard(config, 0, layout.done(0))
    log = [json.loads(line) for line in attempts_path(layout.shard_dir(0)).read_text().splitlines()]
    events = {e["event"]: datetime.fromisoformat(e["at"]) for e in log if "event" in e}
    wall = (events["finished"] - events["engine_started"]).total_seconds()  # model load, engine start left out
    parts = [pq.read_table(p, columns=["completion_tokens", "prompt_tokens"]).to_pylist()
             for p in sorted(layout.shard_dir(0).glob("part-*.parquet"))]
    output = sum(r["completion_tokens"] for part in parts for r in part)
    result = {"arm": name, "turns": sum(map(len, parts)), "output_tokens": output, "wall_s": round(wall, 3),
              "output_tok_per_s": round(output / wall, 2)}
    if hidden:
        from transformers import AutoConfig

        model_config = AutoConfig.from_pretrained(model)
        positions = sum(r["completion_tokens"] + r["prompt_tokens"] for part in parts for r in part)
        written = sum(p.stat().st_size for p in hidden_part_files(layout.shard_dir(0)))
        text = model_config.get_text_config()
        forecast = HiddenCapture("eagle3", hidden["dtype"]).bytes_per_token(text.num_hidden_layers, text.hidden_size)
        result.update(positions=positions, bytes=written, bytes_per_position=round(written / positions, 2),
                      forecast_bytes_per_position=forecast,
                      measured_over_forecast=round(written / positions / forecast, 4))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--save", type=Path)
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    model = build(args.workdir / "demo-model", REPO / "config" / "demo" / "corpus.txt")
    settings = ({}, {"enabled": True, "dtype": "bfloat16"}, {"enabled": True, "dtype": "float8_e4m3fn"})
    arm(args.workdir, model, args.rows, settings[1], "warmup")  # discarded: the process's first forwards
    runs = [arm(args.workdir, model, args.rows, hidden, order)
            for order, chosen in (("forward", settings), ("reverse", settings[::-1])) for hidden in chosen]
    arms = []
    for name in ("off", "bfloat16", "float8_e4m3fn"):
        mine = [r for r in runs if r["arm"] == name]
        wall, output = sum(r["wall_s"] for r in mine), sum(r["output_tokens"] for r in mine)
        arms.append({**mine[0], "wall_s": [r["wall_s"] for r in mine], "output_tok_per_s_runs":
                     [r["output_tok_per_s"] for r in mine], "output_tok_per_s": round(output / wall, 2)})
    off = arms[0]["output_tok_per_s"]
    for result in arms[1:]:
        result["tok_per_s_vs_off"] = round(result["output_tok_per_s"] / off, 3)
    print(json.dumps(arms, indent=1))
    if args.save:
        args.save.write_text(json.dumps({"rows": args.rows, "runs": "warm-up, then off, bf16, fp8, fp8, bf16, off; "
                                         "wall from engine_started to finished", "arms": arms}, indent=1))


if __name__ == "__main__":
    main()
