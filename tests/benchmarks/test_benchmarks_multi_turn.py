"""benchmarks/engine/multi_turn.py on the CPU demo engine: `make` gives a config the schema accepts, and the
single_turn arm sends exactly the each_turn arm's prompt_ids and limits, turn by turn, as independent requests."""

import importlib.util
import json

import pyarrow.parquet as pq
import pytest
from conftest import REPO
from shardgen.config import Config
from shardgen.layout import Layout


def _script():
    spec = importlib.util.spec_from_file_location("multi_turn", REPO / "benchmarks" / "engine" / "multi_turn.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # three generate processes on the CPU engine: ~50 s on 2 cores
def test_single_turn_arm_sends_the_each_turn_arms_prompts(tmp_path, demo_model):
    bench = _script()
    config = bench.make(tmp_path / "w", str(demo_model), conversations=3, max_new_tokens=4, seed=0,
                        backend="transformers", max_words=12)
    assert Config.from_file(config).sources[0].multi_turn == "each_turn"
    result = bench.arms(config, tmp_path / "x.json", ["each_turn:no_radix", "single_turn:no_radix"], "extra_buffer",
                        warm_up=1)

    runs = tmp_path / "w" / "runs"
    each_turn, single_turn = Layout(runs / "each_turn-no_radix"), Layout(runs / "single_turn-no_radix")
    conversations = {r["conversation_id"]: r for r in pq.read_table(each_turn.split(0)).to_pylist()}
    sent = {}  # gen_key -> (turn, prompt_ids, max_new_tokens) of every turn the each_turn arm generated
    for part in bench._parts(each_turn):
        if part["finish_reason"] not in bench.GENERATED:
            continue
        conv = conversations[part["conversation_id"]]
        ids = part["prompt_ids"] if part["turn"] > 1 else conv["prompt_ids"]
        sent[part["gen_key"]] = (part["turn"], ids, conv["max_new_tokens"])
    assert max(turn for turn, _, _ in sent.values()) >= 2, "no conversation reached a second turn"
    single = {r["gen_key"]: (sent[r["gen_key"]][0], r["prompt_ids"], r["max_new_tokens"])
              for r in pq.read_table(single_turn.split(0)).to_pylist()}
    assert single == sent
    assert {r["turn"] for r in bench._parts(single_turn)} == {1}, "single_turn requests carry no turn dependency"

    assert json.loads((tmp_path / "x.json").read_text()) == json.loads(json.dumps(result, default=str))
    assert result["workload"] == "multi_turn" and result["first_arm"] == "each_turn:no_radix"
    assert set(result["each_turn_over_single_turn_output_tps"]) == {"no_radix"}
    assert set(result["warm_ups"]) == {"no_radix"} and result["warm_ups"]["no_radix"]["requests"] >= 2
    assert set(result["arms"]) == {"each_turn:no_radix", "single_turn:no_radix"}
    for name, arm in result["arms"].items():
        assert arm["requests"] == len(sent) and arm["output_tps"] > 0 and arm["engine_start_s"] >= 0, name
        by_turn = arm["cached_tokens_by_turn"]
        assert sum(t["requests"] for t in by_turn.values()) == len(sent)
        assert set(by_turn[1]) == {"requests", "prompt_tokens", "cached_tokens", "mean_cached_tokens"}
