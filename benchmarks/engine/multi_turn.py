"""Multi-turn work on one GPU: `multi_turn: each_turn` conversations against the same token sequences sent as
independent single-turn requests, each with the prefix cache off (`no_radix`) and on.

    python benchmarks/engine/multi_turn.py make --out W --model /root/model/nh8b    # W/chat.jsonl + W/each_turn.yaml
    python benchmarks/engine/multi_turn.py arms --config W/each_turn.yaml --out X.json \
        --arms each_turn:no_radix,single_turn:no_radix,each_turn:radix,single_turn:radix

`make` writes a seeded ShareGPT source of N conversations of 2-6 user turns (prompt words long-tailed as in
variable_length.py) and one config (one shard, dummy weights). Every arm is a `shardgen generate` process on a
fresh results dir (W/runs/<arm>-<strategy>), all with one engine.cache_dir (kernels compiled once, kept warm).
each_turn runs the workflow's prompts, split and generate stages: turn t+1 is rendered and submitted when turn t
completes. single_turn takes that arm's generated turns (turn 1's prompt_ids from its shard file, later turns'
from its parts) and writes them as a prompts.parquet of one-turn rows with exactly those prompt_ids and limits,
then runs shardgen's own split and generate on it: the same code, all requests free from the start, no turn
dependency. (With dummy weights a stop token is almost never sampled, so outputs run to max_new_tokens in both.)
Each arm is timed from its first submit to its last completion (the parts' submitted_at/finished_at); the engine
start (attempt start to engine_started) is apart. cached_tokens per turn index shows what the radix cache reuses:
turn t's prompt is turn t-1's prompt + answer + the next user message, so with the cache on each_turn should hit
the earlier turns' prefix; single_turn also can, when a conversation's turns happen to share the engine.
On the kit's dummy models (make_model.py) an answer's history is roughly 6-7x its output tokens: the tokenizer is a
4,000-token BPE padded to the model's vocab with " vNNNNN" tokens, which random weights mostly sample and which
re-encode as several tokens each; so this workload is prefill-heavy and late turns can exceed the 8,192 context
(`context_exhausted`: the conversation ends; single_turn takes only generated turns).
Before a strategy's first arm, an untimed each_turn run on a few conversations (`--warm-up`, its own engine)
takes the first-run kernel compile and stall, so no timed arm carries it; the JSON keeps it under `warm_ups`.
`--out` is updated after each arm (arms already in it are kept), so the arms can run in separate calls.
"""

import argparse
import glob
import json
import random
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from shardgen.store import tables
from shardgen.config import Config
from shardgen.layout import ATTEMPTS, Layout
from shardgen.prompts.stage import build_prompts
from shardgen.prompts.split import split

SGLANG = {"backend": "sglang", "memory_share": 0.85, "max_running_requests": 256,
          "args": {"load_format": "dummy", "attention_backend": "fa3", "mamba_ssm_dtype": "bfloat16"}}
# `make --engine shipped`: the shipped defaults (mamba_strategy auto), with only what dummy weights need.
SHIPPED = {"backend": "sglang", "args": {"load_format": "dummy", "attention_backend": "fa3"}}
TRANSFORMERS = {"backend": "transformers", "max_running_requests": 8}  # the CPU demo engine, for the smoke test
SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "shi", "en", "qua", "dor", "pel", "ix", "ur", "sa", "be"]
GENERATED = ("stop", "length")


def _words(rng: random.Random, n: int) -> str:
    return " ".join("".join(rng.choices(SYLLABLES, k=rng.randint(1, 3))) for _ in range(n))


def make(out: Path, model: str, conversations: int, max_new_tokens: int, seed: int, backend: str,
         max_words: int, engine_settings: str = "fixed") -> Path:
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "chat.jsonl", "w") as f:
        for i in range(conversations):
            turns = []
            for t in range(rng.randint(2, 6)):
                words = min(max_words, max(4, int(rng.lognormvariate(4.0, 0.9))))  # median ~55 words, long tail
                turns += [{"from": "human", "value": f"[chat {i} turn {t + 1}] " + _words(rng, words)},
                          {"from": "gpt", "value": _words(rng, 8)}]  # the reference: regenerated, never sent
            f.write(json.dumps({"conversations": turns}) + "\n")
    # The cache_dir is absolute: every arm's fresh results dir shares the compiled kernels.
    settings = TRANSFORMERS if backend != "sglang" else SHIPPED if engine_settings == "shipped" else SGLANG
    engine = {**settings, "cache_dir": str((out / "engine-cache").resolve())}
    config = {"results_dir": str((out / "runs" / "each_turn").resolve()), "model": {"path": model},
              "engine": engine, "gpus": 1 if backend == "sglang" else 0, "shards": 1,
              "defaults": {"temperature": 0.8, "top_p": 1.0, "max_new_tokens": max_new_tokens}, "seed": seed,
              "sources": [{"name": "chat", "path": str((out / "chat.jsonl").resolve()), "format": "sharegpt",
                           "multi_turn": "each_turn"}]}
    path = out / "each_turn.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    Config.from_file(path)  # the schema's check, before any GPU time is spent
    return path


def _parts(layout: Layout) -> list[dict]:
    return [r for p in sorted(glob.glob(layout.parts_glob)) for r in pq.read_table(p).to_pylist()]


def single_turn_prompts(each_turn: Layout) -> list[dict]:
    """One prompts row per turn the each_turn arm generated: that turn's exact prompt_ids and limits."""
    conversations = {r["conversation_id"]: r for r in pq.read_table(each_turn.split(0)).to_pylist()}
    rows = []
    for part in sorted(_parts(each_turn), key=lambda r: (r["conversation_id"], r["turn"])):
        if part["finish_reason"] not in GENERATED:
            continue
        conv, t = conversations[part["conversation_id"]], part["turn"]
        ids = part["prompt_ids"] if t > 1 else conv["prompt_ids"]
        # prompt_id = gen_key = the turn's own key, so this arm's rows map back to their turn index.
        rows.append({**conv, "prompt_id": part["gen_key"], "gen_key": part["gen_key"], "prompt_ids": ids,
                     "messages": part["messages"] if t > 1 else conv["messages"], "prompt_tokens": len(ids),
                     "reference": conv["references"][t - 1], "conversation_id": part["gen_key"],
                     "turns": [conv["turns"][t - 1]], "references": [conv["references"][t - 1]],
                     "work_tokens": len(ids) + conv["max_new_tokens"]})
    return rows


def _generate(config: Config, layout: Layout) -> None:
    """The workflow's generate job for shard 0, as its own process (each arm starts its own engine)."""
    cmd = [sys.executable, "-m", "shardgen.cli", "--config", str(config.write_resolved()), "generate", "--shard", "0",
           "--done", str(layout.done(0))]
    subprocess.run(cmd, check=True)


def _figures(layout: Layout, turn_of: dict[str, int]) -> dict:
    parts = _parts(layout)
    rows = [r for r in parts if r["finish_reason"] in GENERATED]
    wall = (max(r["finished_at"] for r in rows) - min(r["submitted_at"] for r in rows)).total_seconds()
    tokens = sum(r["completion_tokens"] for r in rows)
    by_turn: dict[int, list[dict]] = {}
    for r in rows:
        by_turn.setdefault(turn_of[r["gen_key"]], []).append(r)
    events = [json.loads(x) for x in (layout.shard_dir(0) / ATTEMPTS).read_text().splitlines()]
    started = next(datetime.fromisoformat(e["started_at"]) for e in events if "started_at" in e)
    ready = next(datetime.fromisoformat(e["at"]) for e in events if e.get("event") == "engine_started")
    return {"requests": len(rows), "context_exhausted": sum(r["finish_reason"] == "context_exhausted" for r in parts),
            "completion_tokens": tokens, "prompt_tokens": sum(r["prompt_tokens"] for r in rows),
            "wall_s": round(wall, 2), "output_tps": round(tokens / wall, 1),
            "engine_start_s": round((ready - started).total_seconds(), 1),
            "cached_tokens": sum(r["cached_tokens"] for r in rows),
            "cached_tokens_by_turn": {t: {"requests": len(rs), "prompt_tokens": sum(r["prompt_tokens"] for r in rs),
                                          "cached_tokens": sum(r["cached_tokens"] for r in rs),
                                          "mean_cached_tokens": round(sum(r["cached_tokens"] for r in rs) / len(rs), 1)}
                                      for t, rs in sorted(by_turn.items())}}


def run_arm(base: Config, arm: str, label: str, strategy: str, conversations: int | None = None) -> dict:
    """One arm (each_turn, single_turn, or warm_up: each_turn on the first `conversations`) on a fresh results dir."""
    root = Path(base.results).parent
    layout = Layout(root / f"{arm}-{label}")
    shutil.rmtree(layout.root, ignore_errors=True)  # a fresh results dir: nothing committed to resume from
    engine = {**base.raw["engine"], "sglang": {**base.raw["engine"].get("sglang", {}), "mamba_strategy": strategy}}
    sources = [{**source, "limit": conversations} for source in base.raw["sources"]]
    config = Config.from_dict({**base.raw, "results_dir": str(layout.root), "engine": engine, "sources": sources})
    each_turn = Layout(root / f"each_turn-{label}") if arm == "single_turn" else layout
    if arm == "single_turn":
        if not each_turn.done(0).exists():
            raise SystemExit(f"single_turn:{label} needs each_turn:{label} run first ({each_turn.root})")
        layout.prompts.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(single_turn_prompts(each_turn), schema=tables.PROMPTS), layout.prompts)
    else:
        build_prompts(config, layout.prompts_dir)
    split(layout.prompts, layout.split_dir, 1)
    _generate(config, layout)
    turn_of = {r["gen_key"]: r["turn"] for r in _parts(each_turn)}
    done = json.loads(layout.done(0).read_text())
    return {"arm": arm, "cache": label, "mamba_strategy": strategy, "results_dir": str(layout.root),
            **_figures(layout, turn_of), "engine": done["engine"]}


def arms(config_path: Path, out: Path, order: list[str], radix_strategy: str, warm_up: int) -> dict:
    base = Config.from_file(config_path)
    result = json.loads(out.read_text()) if out.exists() else {
        "workload": "multi_turn", "config": base.raw, "radix_strategy": radix_strategy, "first_arm": order[0],
        "arms": {}, "warm_ups": {}}
    for name in order:
        arm, label = name.split(":")
        # auto: the shipped choice, resolved per arm from its work (each_turn: a prefix cache; single turns: not)
        strategy = label if label in ("no_radix", "auto") else radix_strategy
        if warm_up and label not in result["warm_ups"]:
            # A strategy's first engine compiles kernels its cache_dir lacks and stalls (~20 s, see the README's
            # engine-start section): a short untimed run takes that, not the first timed arm.
            result["warm_ups"][label] = run_arm(base, "warm_up", label, strategy, warm_up)
        arm_result = run_arm(base, arm, label, strategy)
        result["arms"][name] = arm_result
        result["sglang_version"] = (arm_result["engine"] or {}).get("version")
        result["date"] = datetime.now(UTC).isoformat(timespec="seconds")
        result["each_turn_over_single_turn_output_tps"] = {
            label: round(result["arms"][f"each_turn:{label}"]["output_tps"] /
                         result["arms"][f"single_turn:{label}"]["output_tps"], 4)
            for label in ("no_radix", "radix", "auto")
            if {f"each_turn:{label}", f"single_turn:{label}"} <= result["arms"].keys()}
        out.write_text(json.dumps(result, indent=1, default=str) + "\n")
        print(json.dumps({k: v for k, v in arm_result.items() if k not in ("engine", "cached_tokens_by_turn")}),
              flush=True)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["make", "arms"])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--model", default="/root/model/nh8b")
    ap.add_argument("--conversations", type=int, default=600)
    ap.add_argument("--max-new-tokens", type=int, default=192)
    ap.add_argument("--max-words", type=int, default=400, help="make: words per user turn at most")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engine", choices=["fixed", "shipped"], default="fixed",
                    help="make: the fixed SGLang settings above, or the shipped defaults (arms labelled auto)")
    ap.add_argument("--backend", choices=["sglang", "transformers"], default="sglang",
                    help="make: transformers = the CPU demo engine (smoke test)")
    ap.add_argument("--config", type=Path, help="arms: make's each_turn.yaml")
    ap.add_argument("--arms", default="each_turn:no_radix,single_turn:no_radix,each_turn:radix,single_turn:radix",
                    help="arms: which, in this order (single_turn:X after each_turn:X)")
    ap.add_argument("--radix-strategy", default="extra_buffer",
                    help="arms: the mamba_strategy of the `radix` arms (the radix cache on, overlap scheduling kept)")
    ap.add_argument("--warm-up", type=int, default=16,
                    help="arms: before a strategy's first arm, an untimed each_turn run on this many conversations")
    args = ap.parse_args()
    if args.mode == "make":
        print(make(args.out, args.model, args.conversations, args.max_new_tokens, args.seed, args.backend,
                   args.max_words, args.engine))
    else:
        result = arms(args.config, args.out, args.arms.split(","), args.radix_strategy, args.warm_up)
        print(json.dumps({"each_turn_over_single_turn_output_tps": result["each_turn_over_single_turn_output_tps"]}))


if __name__ == "__main__":
    main()
