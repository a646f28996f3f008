"""The figures of a sessions/hidden.sh lease, from its files: capture on against off on the same rows (generation
wall and output tok/s from each done file), the capture pass's split (the done file's engine.hidden_pass), the
bytes of states per position against the storage plan's 40 KiB (5 layers x 4,096 x bfloat16 on nh8b), and
hidden_values.py's summary.

    python benchmarks/capture/hidden_summary.py --prefix benchmarks/results/2026-12-07-h100-hidden --out SUMMARY.json
"""

import argparse
import json
from pathlib import Path


def generation(done: dict) -> dict:
    return {"prompts": done["prompts"], "prompt_tokens": done["prompt_tokens"],
            "completion_tokens": done["completion_tokens"], "generation_s": done["wall_s"],
            "output_tok_s": done["output_tokens_per_s"],
            "max_running_requests": done["attempts"][-1]["max_running_requests"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prefix", required=True, help="the lease's files: PREFIX-off-done.json, PREFIX-on-done.json...")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    read = lambda name: json.loads(Path(f"{args.prefix}-{name}").read_text())  # noqa: E731
    off, on = read("off-done.json"), read("on-done.json")
    record = on["engine"]["hidden_pass"]
    positions = record["positions"]
    summary = {
        "off": generation(off), "on": generation(on),
        "on_over_off_output_tok_s": round(on["output_tokens_per_s"] / off["output_tokens_per_s"], 3),
        "extra_generation_s": round(on["wall_s"] - off["wall_s"], 1),
        "positions_over_generated": round(positions / on["completion_tokens"], 3),
        "pass_positions_per_extra_s": round(positions / (on["wall_s"] - off["wall_s"])),
        "hidden_pass": record,
        "bytes_per_position": round(record["hook"]["bytes"] / positions, 1),
        "values": read("hidden_values.json")["summary"],
    }
    args.out.write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k not in ("hidden_pass", "values")}, indent=1))


if __name__ == "__main__":
    main()
