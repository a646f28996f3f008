"""The prompts stage's floor and the cost of each per-row change, in one process on one thread
(TOKENIZERS_PARALLELISM=false, set by cpu_pipeline.py): the rows of SOURCE are normalized and rendered (untimed),
then the bare tokenizer's encode_batch is timed on those texts, and each old per-row step against its new one.

    python benchmarks/cpu/bench_floor.py MODEL SOURCE OUT.json COMPONENT_ROWS
"""

import json
import sys
import time
from pathlib import Path

import pyarrow as pa

from shardgen.store import tables
from shardgen.prompts.formats import conversation
from shardgen.keys import gen_key, gen_key_of, prompt_id
from shardgen.sampling import FIELDS
from shardgen.model.target import ModelInfo

BATCH = 2048


def cpu(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def batched(items: list, fn) -> list:
    return [out for i in range(0, len(items), BATCH) for out in fn(items[i:i + BATCH])]


def main() -> None:
    model_dir, source, out, component_rows = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
    model = ModelInfo(model_dir)
    tokenizer, backend = model.tokenizer, model.tokenizer.backend_tokenizer
    with open(source) as f:
        convs = [conversation(json.loads(line), "query_response", {}, None)[0] for line in f]
    messages = [c.messages for c in convs]
    texts = batched(messages, lambda b: model.chat.render(b, {}))
    assert texts[:100] == tokenizer.apply_chat_template(messages[:100], add_generation_prompt=True, tokenize=False)
    tokens = []
    wall = time.perf_counter()
    floor_s = cpu(lambda: tokens.extend(batched(
        texts, lambda b: [e.ids for e in backend.encode_batch(b, add_special_tokens=False)])))
    floor_wall = time.perf_counter() - wall
    fast_s = cpu(lambda: batched(texts, lambda b: backend.encode_batch_fast(b, add_special_tokens=False)))
    n, m = len(texts), min(component_rows, len(texts))
    sub, subtexts = messages[:m], texts[:m]
    fingerprint, sampling = model.fingerprint, {"max_new_tokens": 512, "temperature": 0.7, "top_p": 0.95,
                                                "top_k": -1, "extra": "{}"}
    pids = [prompt_id(x) for x in sub]
    fast_key = gen_key_of(fingerprint, sampling)
    ids = tokens[:m]
    rows = [{"prompt_id": p, "gen_key": p, "source": "s", "source_row": i, "messages": x, "prompt_ids": t,
             "prompt_tokens": len(t), "max_new_tokens": 512, **{f.name: f.neutral for f in FIELDS},
             "temperature": 0.7, "top_p": 0.95, "sampling_extra": "{}", "sampling_origin": "{}", "reference": None,
             "dropped_turns": 0, "context_length": 4096,  # cpu_pipeline's config_for
             "conversation_id": p, "turns": [x[-1]["content"]], "references": [None],
             "work_tokens": len(t) + 512}
            for i, (p, x, t) in enumerate(zip(pids, sub, ids))]
    columns = {k: [r[k] for r in rows] for k in tables.PROMPTS.names}
    us = lambda seconds: round(seconds / m * 1e6, 2)  # noqa: E731
    changes = {
        "render": {"old": us(cpu(lambda: batched(sub, lambda b: tokenizer.apply_chat_template(
                       b, add_generation_prompt=True, tokenize=False)))),
                   "new": us(cpu(lambda: batched(sub, lambda b: model.chat.render(b, {})))),
                   "what": "apply_chat_template per batch -> the template rendered once per batch"},
        "ids": {"old": us(cpu(lambda: batched(subtexts, lambda b: tokenizer(b, add_special_tokens=False).input_ids))),
                "new": us(cpu(lambda: batched(subtexts, model.chat.ids))),
                "what": "tokenizer(texts).input_ids -> encode_batch_fast ids (no BatchEncoding, no offsets)"},
        "gen_key": {"old": us(cpu(lambda: [gen_key(p, fingerprint, sampling) for p in pids])),
                    "new": us(cpu(lambda: [fast_key(p) for p in pids])),
                    "what": "gen_key JSON per row -> JSON around the prompt_id serialized once per source"},
        "row_building": {"old": us(cpu(lambda: pa.Table.from_pylist(rows, schema=tables.PROMPTS))),
                 "new": us(cpu(lambda: pa.record_batch(columns, schema=tables.PROMPTS))),
                 "what": "a dict per row + Table.from_pylist -> columns + record_batch"},
        "prompt_id (unchanged)": {"old": None, "new": us(cpu(lambda: [prompt_id(x) for x in sub]))},
        "normalize (unchanged)": {"old": None, "new": us(cpu(lambda: [conversation(
            {"query": x[0]["content"], "response": "ok"}, "query_response", {}, None) for x in sub]))},
    }
    out.write_text(json.dumps({
        "floor": {"rows": n, "encode_batch_s": round(floor_s, 2), "encode_batch_wall_s": round(floor_wall, 2),
                  "encode_batch_fast_s": round(fast_s, 2), "encode_batch_rows_per_s": round(n / floor_s),
                  "mean_prompt_tokens": round(sum(map(len, tokens)) / n, 1)},
        "per_row_cpu_us": {"rows": m, **changes}}, indent=1))


if __name__ == "__main__":
    main()
