"""`shardgen audit` end to end on the CPU engine and the demo model: the own setting of a run captured at generation
reproduces its logprobs (argmax and top-k agreement computed, the logprob difference near zero), a bfloat16 setting
moves them measurably, both reports are written with their declared schema; bad settings fail at config time
naming the problem."""

import json

import pyarrow.parquet as pq
import pytest

from shardgen.store import tables
from shardgen.audit import audit
from shardgen.cli import main
from shardgen.config import ConfigError
from shardgen.layout import AuditLayout, Layout

from helpers import stage

GREEDY = {"temperature": 0.0, "max_new_tokens": 8}


def captured_run(make_config, write_jsonl, generate=True):
    rows = [{"query": f"What is {i} plus {i + 1}?"} for i in range(5)]
    cfg = make_config([{"name": "q", "path": write_jsonl("q.jsonl", rows), "format": "query_response",
                        "sampling": GREEDY}], capture={"logprobs": True, "top_k": 5}, shards=1)
    if generate:
        stage(cfg, 1)
    return cfg


@pytest.fixture(scope="module")
def audited(tmp_path_factory, demo_model):
    import yaml
    from conftest import REPO
    from shardgen.config import Config

    tmp = tmp_path_factory.mktemp("audit")
    (tmp / "q.jsonl").write_text("".join(json.dumps({"query": f"What is {i} plus {i + 1}?"}) + "\n" for i in range(5)))
    raw = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    raw.update(results_dir=str(tmp / "results"), shards=1, capture={"logprobs": True, "top_k": 5},
               sources=[{"name": "q", "path": str(tmp / "q.jsonl"), "format": "query_response", "sampling": GREEDY}])
    raw["model"]["path"] = str(demo_model)
    cfg = Config.from_dict(raw)
    stage(cfg, 1)
    summary = audit(cfg, tmp / "audit", sample=4, seed=3, top_k=None, against=["engine.args.dtype=bfloat16"])
    return cfg, tmp / "audit", summary


def test_own_reproduces_the_captured_logprobs_and_bfloat16_moves_them(audited):
    cfg, out, summary = audited
    own, bf16 = summary["settings"]
    assert summary["sample"] == {"requested": 4, "turns": 4, "seed": 3, "top_k": 5}  # k: capture's
    assert (own["setting"], own["status"], bf16["setting"], bf16["status"]) == \
        ("own", "ok", "engine.args.dtype=bfloat16", "ok")
    assert own["turns"] == 4 and own["captured_turns"] == 4 and own["tokens"] > 4
    # greedy and the same numbers: every generated token is the re-scored argmax, and in the top k
    assert own["argmax_match"] == 1.0 and own["in_top_k"] == 1.0
    assert own["logprob_diff"]["max_abs"] < 1e-4  # float32 on both sides: ~5e-7 here
    assert own["logprob_diff"]["mean_abs"] <= own["logprob_diff"]["p99_abs"] <= own["logprob_diff"]["max_abs"]
    assert "versus_own" not in own
    assert own["engine"]["weights"] == "float32" and bf16["engine"]["weights"] == "bfloat16"
    # bfloat16 weights change the numbers: far more than own's reproduction, against generation and against own
    assert bf16["logprob_diff"]["max_abs"] > 10 * max(own["logprob_diff"]["max_abs"], 1e-5)
    assert bf16["versus_own"]["mean_abs"] > 1e-3 and bf16["tokens"] == own["tokens"]


def test_the_turns_table_has_its_schema_and_a_row_per_setting_and_turn(audited):
    _, out, summary = audited
    table = pq.read_table(AuditLayout(out).turns)
    assert table.schema.equals(tables.AUDIT_TURNS)
    rows = table.to_pylist()
    assert sorted({r["setting"] for r in rows}) == ["engine.args.dtype=bfloat16", "own"] and len(rows) == 8
    own = [r for r in rows if r["setting"] == "own"]
    assert sum(r["tokens"] for r in own) == summary["settings"][0]["tokens"]
    assert all(r["first_argmax_mismatch"] is None and r["logprob_diff_max_abs"] < 1e-3 for r in own)
    assert json.loads(AuditLayout(out).summary.read_text()) == summary
    assert len(summary["settings"][1]["most_drift"]) == 4


def test_the_same_seed_draws_the_same_turns_and_another_seed_other_ones(audited):
    from shardgen.audit.sample import write_sample

    cfg, out, _ = audited
    keys = lambda path: [r["gen_key"] for r in pq.read_table(path).to_pylist()]  # noqa: E731
    assert write_sample(cfg, out / "again.parquet", 4, 3) == 4
    assert keys(out / "again.parquet") == keys(AuditLayout(out).sample)
    write_sample(cfg, out / "other.parquet", 4, 11)
    assert keys(out / "other.parquet") != keys(AuditLayout(out).sample)


def test_bad_settings_fail_at_config_time_naming_the_problem(make_config, write_jsonl, tmp_path):
    cfg = captured_run(make_config, write_jsonl, generate=False)
    run = lambda **kw: audit(cfg, tmp_path / "a", **{"sample": 5, "seed": 0, "top_k": None,  # noqa: E731
                                                      "against": [], **kw})
    with pytest.raises(ConfigError, match="--top-k 65: .* between 1 and 64"):
        run(top_k=65)
    with pytest.raises(ConfigError, match=r"engine\.bogus=1.*bogus"):
        run(against=["engine.bogus=1"])
    with pytest.raises(ConfigError, match="is not dotted.config.key=value"):
        run(against=["engine.args.dtype"])
    with pytest.raises(ConfigError, match="is not dotted.config.key=value"):
        run(against=["=bfloat16"])
    with pytest.raises(ConfigError, match="nothing to audit: .* no generated turn"):
        run()
    assert not Layout(cfg.results).shard_dir(0).exists()  # nothing was generated, nor started


def test_the_command_says_a_config_time_failure_in_one_line(make_config, write_jsonl, capsys, caplog):
    cfg = captured_run(make_config, write_jsonl, generate=False)
    assert main(["--config", str(cfg.write_resolved()), "audit"]) == 2
    assert "nothing to audit" in caplog.text and "Traceback" not in caplog.text


def test_the_command_prints_each_setting_and_its_drifting_turns(audited, capsys, tmp_path):
    cfg, _, _ = audited
    assert main(["--config", str(cfg.write_resolved()), "audit", "--sample", "2", "--seed", "3",
                 "--out", str(tmp_path / "cli")]) == 0
    out = capsys.readouterr().out
    header, _, own_row = out.splitlines()[1:4]
    assert header.split()[:7] == ["setting", "status", "turns", "tokens", "argmax_match", "in_top_k", "compared"]
    assert own_row.split()[:3] == ["own", "ok", "2"] and own_row.split()[4:7] == ["1.0", "1.0", "2"]
    assert "own: the turns that drift most" in out
    assert f"written: {AuditLayout(tmp_path / 'cli').summary}" in out
    assert json.loads(AuditLayout(tmp_path / "cli").summary.read_text())["sample"]["turns"] == 2
