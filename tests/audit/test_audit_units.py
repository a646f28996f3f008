"""The audit's pure parts: the metrics on hand-made numbers, the settings' text, and SGLang's meta_info read into
Scores whichever way its input logprobs start (with a leading None, or an entry more), or refused naming the request
when they do not end with the target."""

import math

import pytest

from shardgen.audit import metrics
from shardgen.audit.settings import applied, parse
from shardgen.config import ConfigError
from shardgen.engines.scoring import ScoreRequest
from shardgen.engines.sglang.scoring import generate_args, scores_of


def test_argmax_and_top_k_fractions_are_over_tokens_and_the_first_mismatch_is_its_position():
    scores = {"argmax_ids": [5, 6, 7, 8], "top_ids": [[5, 1], [6, 2], [3, 9], [4, 8]],
              "logprobs": [-1.0, -2.0, -3.0, -4.0], "temperature": 1.0}
    turn = {"conversation_id": "c", "turn": 2, "gen_key": "k", "output_ids": [5, 6, 9, 1],
            "token_logprobs": [-1.0, -2.5, math.nan, -3.0], "temperature": 0.0}  # greedy: logprobs at 1
    row = metrics.turn_row("own", turn, scores, top_k=2)
    assert (row["argmax_match"], row["in_top_k"], row["first_argmax_mismatch"], row["tokens"]) == (0.5, 0.75, 2, 4)
    assert (row["logprob_diff_mean_abs"], row["logprob_diff_max_abs"]) == (0.5, 1.0)  # 0, 0.5, 1: NaN left out
    assert metrics.turn_row("own", turn, scores, top_k=1)["in_top_k"] == 0.5  # k 1: the argmax alone
    uncaptured = metrics.turn_row("own", {**turn, "token_logprobs": None}, scores, top_k=2)
    assert uncaptured["logprob_diff_mean_abs"] is None and uncaptured["logprob_diff_max_abs"] is None
    # sampled at 0.7 and scored at 1 (SGLang's prefill): no difference is taken, the argmax and top-k still count
    other = metrics.turn_row("own", {**turn, "temperature": 0.7}, scores, top_k=2)
    assert other["logprob_diff_mean_abs"] is None and (other["argmax_match"], other["in_top_k"]) == (0.5, 0.75)
    assert metrics.turn_row("own", {**turn, "temperature": 0.7}, {**scores, "temperature": 0.7},
                            top_k=2)["logprob_diff_max_abs"] == 1.0
    # a repetition penalty: SGLang's generation-time logprobs come after it, a prefill's never do
    assert metrics.turn_row("own", {**turn, "repetition_penalty": 1.1}, scores, top_k=2)["logprob_diff_max_abs"] is None
    assert metrics.turn_row("own", {**turn, "repetition_penalty": 1.0}, scores, top_k=2)["logprob_diff_max_abs"] == 1.0


def test_spread_is_mean_p99_and_max_of_absolute_differences():
    assert metrics.spread([]) is None
    figures = metrics.spread([float(i) for i in range(101)])  # 0..100: p99 is 99 exactly
    assert figures == {"mean_abs": 50.0, "p99_abs": 99.0, "max_abs": 100.0}
    assert metrics.spread([0.0, 1.0])["p99_abs"] == pytest.approx(0.99)  # linear between ranks


def test_setting_figures_weigh_tokens_and_compare_with_own():
    turns = [{"output_ids": [1, 2, 3], "token_logprobs": [-1.0, -1.0, -1.0], "temperature": 1.0},
             {"output_ids": [4], "token_logprobs": None, "temperature": 1.0}]
    own = [{"argmax_ids": [1, 2, 3], "top_ids": [[1], [2], [3]], "logprobs": [-1.0, -1.0, -1.0], "temperature": 1.0},
           {"argmax_ids": [9], "top_ids": [[9]], "logprobs": [-2.0], "temperature": 1.0}]
    other = [{**own[0], "logprobs": [-1.5, -1.0, -1.0]}, {**own[1], "logprobs": [-2.5]}]
    figures = metrics.setting_figures(turns, other, 1, own)
    assert (figures["tokens"], figures["captured_turns"], figures["argmax_match"]) == (4, 1, 0.75)
    assert figures["compared_turns"] == 1
    assert figures["logprob_diff"]["max_abs"] == 0.5 and figures["logprob_diff"]["mean_abs"] == pytest.approx(0.5 / 3)
    assert figures["versus_own"] == {"mean_abs": 0.25, "p99_abs": pytest.approx(0.5), "max_abs": 0.5}
    assert "versus_own" not in metrics.setting_figures(turns, own, 1, None)
    # scored at another temperature than own's (the CPU engine's T against SGLang's 1): not compared with own
    apart = [{**s, "temperature": 0.7} for s in other]
    assert metrics.setting_figures(turns, apart, 1, own)["versus_own"] is None


def test_most_drift_ranks_captured_turns_by_logprob_difference_else_by_argmax_mismatch():
    rows = [{"gen_key": k, "logprob_diff_mean_abs": d, "argmax_match": a}
            for k, d, a in (("a", 0.1, 1.0), ("b", 0.3, 1.0), ("c", None, 0.2), ("d", None, 0.9))]
    assert [r["gen_key"] for r in metrics.most_drift(rows, 3)] == ["b", "a", "c"]


def test_a_setting_text_is_dotted_keys_with_yaml_values():
    assert parse("engine.args.kv_cache_dtype=fp8_e4m3") == {"engine.args.kv_cache_dtype": "fp8_e4m3"}
    assert parse("engine.backend=transformers,gpus=0") == {"engine.backend": "transformers", "gpus": 0}
    assert parse("engine.args={dtype: bfloat16, x: 1}") == {"engine.args": {"dtype": "bfloat16", "x": 1}}
    for bad in ("engine.args.dtype", "=1", "engine..x=1", "engine.args.dtype="):
        with pytest.raises(ConfigError, match="is not dotted.config.key=value"):
            parse(bad)


def test_switching_the_backend_leaves_the_other_backend_args_behind():
    raw = {"engine": {"backend": "sglang", "args": {"attention_backend": "fa3"}}, "gpus": 8}
    assert applied(raw, {"engine.backend": "transformers", "gpus": 0}) == \
        {"engine": {"backend": "transformers", "args": {}}, "gpus": 0}
    assert applied(raw, {"engine.backend": "transformers", "engine.args.dtype": "bfloat16"})["engine"]["args"] == \
        {"dtype": "bfloat16"}
    assert applied(raw, {"engine.args.kv_cache_dtype": "fp8_e4m3"})["engine"]["args"] == \
        {"attention_backend": "fa3", "kv_cache_dtype": "fp8_e4m3"}
    assert raw["engine"]["args"] == {"attention_backend": "fa3"}  # the run's own config untouched
    with pytest.raises(ConfigError, match="gpus is a value, not a section"):
        applied(raw, {"gpus.x": 1})


REQUEST = ScoreRequest("r1", [10, 11, 12], [20, 21], {"temperature": 0.0})
TOP = [[(-0.1, 20, None), (-2.0, 30, None)], [(-0.5, 31, None), (-0.9, 21, None)]]


@pytest.mark.parametrize("lead", [[(None, 12, None)], [(None, 11, None), (-3.0, 12, None)], []],
                         ids=["leading-none", "an-entry-more", "target-only"])
def test_sglang_input_logprobs_are_read_from_the_end_whatever_comes_first(lead):
    meta = {"input_token_logprobs": [*lead, (-0.1, 20, None), (-0.9, 21, None)],
            "input_top_logprobs": [*([None] * len(lead)), *TOP]}
    scores = scores_of(REQUEST, meta, top_k=1)
    assert scores.logprobs == [-0.1, -0.9] and scores.argmax_ids == [20, 31] and scores.temperature == 1.0
    assert scores.top_ids == [[20], [31]] and scores.top_logprobs == [[-0.1], [-0.5]]


def test_sglang_input_logprobs_that_do_not_end_with_the_target_fail_naming_the_request():
    shifted = {"input_token_logprobs": [(None, 12, None), (-0.1, 20, None)], "input_top_logprobs": [None, TOP[0]]}
    with pytest.raises(RuntimeError, match="r1: SGLang's input logprobs do not end with the target's 2 tokens"):
        scores_of(REQUEST, shifted, top_k=2)
    no_top = {"input_token_logprobs": [(None, 12, None), (-0.1, 20, None), (-0.9, 21, None)],
              "input_top_logprobs": [None, TOP[0], []]}
    with pytest.raises(RuntimeError, match="r1: SGLang gave a target position no top logprobs"):
        scores_of(REQUEST, no_top, top_k=2)


def test_sglang_is_asked_for_the_input_logprobs_from_the_prompt_last_position_with_one_new_token():
    args = generate_args([REQUEST, ScoreRequest("r2", [1], [2], {"temperature": 0.7})], top_k=0)
    assert args["input_ids"] == [[10, 11, 12, 20, 21], [1, 2]] and args["logprob_start_len"] == [2, 0]
    assert args["sampling_params"] == [{"max_new_tokens": 1}, {"max_new_tokens": 1}]  # a prefill's logprobs: T 1
    assert args["return_logprob"] is True and args["top_logprobs_num"] == 1  # the argmax is always asked


def test_the_default_k_is_the_capture_of_any_source_else_20(make_config, write_jsonl):
    from shardgen.audit import top_k_of

    source = {"name": "q", "path": write_jsonl("q.jsonl", [{"query": "x"}]), "format": "query_response"}
    assert top_k_of(make_config([source]), None) == 20  # nothing captured
    assert top_k_of(make_config([{**source, "capture": True}], capture={"top_k": 7}), None) == 7  # one source's
    assert top_k_of(make_config([source], capture={"logprobs": True, "top_k": 0}), None) == 20  # k 0: no top k
    assert top_k_of(make_config([source]), 3) == 3
