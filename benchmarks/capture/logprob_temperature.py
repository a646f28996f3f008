"""Which temperature SGLang's logprobs are at, on a model with real distributions (the demo's): while generating
(`output_token_logprobs`) and in a prefill (`input_token_logprobs`, what `shardgen audit` scores with).

    python -m shardgen.cli demo-model --out /root/demo-model --corpus config/demo/corpus.txt
    python benchmarks/capture/logprob_temperature.py --model /root/demo-model --out logprob_temperature.json

Sixteen seeded prompts generate 24 tokens each, sampled at T and greedy. Each answer is then scored again by a
prefill (prompt + answer, `max_new_tokens` 1, `logprob_start_len` = prompt - 1) whose request says T, and one whose
request says 1. Printed per pair: the mean and max |difference| of the chosen tokens' logprobs. If a prefill ignores
the request's temperature, its two scorings agree. If generation is at T, the sampled run differs from both
scorings, while the greedy run (at 1) matches them.
"""

import argparse
import json
import random

import numpy as np


def spread(a: list[float], b: list[float]) -> dict:
    diffs = np.abs(np.asarray(a) - np.asarray(b))
    return {"mean_abs": round(float(diffs.mean()), 6), "max_abs": round(float(diffs.max()), 6), "tokens": len(diffs)}


def chosen(entries: list, n: int) -> list[float]:
    return [float(e[0]) for e in entries[-n:]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--temperature", type=float, default=0.6)
    args = ap.parse_args()
    import sglang

    engine = sglang.Engine(model_path=args.model, attention_backend="fa3", mem_fraction_static=0.5,
                           disable_piecewise_cuda_graph=True, random_seed=0, log_level="error")
    rng = random.Random(0)
    vocab = json.load(open(f"{args.model}/config.json"))["vocab_size"]
    prompts = [[rng.randrange(3, vocab) for _ in range(20)] for _ in range(16)]
    result = {"model": args.model, "temperature": args.temperature, "sglang": sglang.__version__}
    for name, t in (("sampled", args.temperature), ("greedy", 0.0)):
        made = engine.generate(input_ids=prompts, sampling_params={"max_new_tokens": 24, "temperature": t,
                                                                    "ignore_eos": True},
                               return_logprob=True, top_logprobs_num=1, logprob_start_len=-1)
        generated = [chosen(out["meta_info"]["output_token_logprobs"], len(out["output_ids"])) for out in made]
        prefills = {}
        for label, asked in (("prefill_asked_T", t or 1.0), ("prefill_asked_1", 1.0)):
            scored = engine.generate(input_ids=[p + out["output_ids"] for p, out in zip(prompts, made)],
                                     sampling_params={"max_new_tokens": 1, "temperature": asked},
                                     return_logprob=True, top_logprobs_num=1,
                                     logprob_start_len=[len(p) - 1 for p in prompts])
            prefill = [chosen(s["meta_info"]["input_token_logprobs"], len(out["output_ids"]))
                       for s, out in zip(scored, made)]
            result[f"{name}_vs_{label}"] = spread(sum(generated, []), sum(prefill, []))
            result[f"{name}_{label}_logprob_mean"] = round(float(np.mean(sum(prefill, []))), 6)
            prefills[label] = sum(prefill, [])
        result[f"{name}_prefill_T_vs_1"] = spread(prefills["prefill_asked_T"], prefills["prefill_asked_1"])
        result[f"{name}_generation_logprob_mean"] = round(float(np.mean(sum(generated, []))), 6)
        print(json.dumps(result), flush=True)
        open(args.out, "w").write(json.dumps(result, indent=1) + "\n")
    engine.shutdown()


if __name__ == "__main__":
    main()
