"""Helpers shared by test modules (fixtures live in conftest.py): staged runs, part and dataset rows, the
`shardgen generate` subprocess, the fake SGLang's path, the ServerArgs fields of real SGLang versions."""

import asyncio
import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from shardgen.config import Config
from shardgen.generate.shard import generate_shard
from shardgen.layout import Layout
from shardgen.merge.dataset import merge
from shardgen.merge.exports import EXPORTS
from shardgen.prompts.split import split
from shardgen.prompts.stage import build_prompts
from shardgen.sampling import FIELDS

import preloaded

TESTS = Path(__file__).resolve().parent
FAKE = TESTS / "fake_sglang"
LOGS = TESTS / "data" / "sglang-logs"
SERVER_ARGS = TESTS / "data" / "sglang-server-args"  # <version>.txt: its ServerArgs fields, read from its wheel
SGLANG_VERSIONS = ("0.5.13.post1", "0.5.17", "0.5.23")


def server_arg_fields(version: str) -> set[str]:
    """The ServerArgs field names of this SGLang version (one of SGLANG_VERSIONS), from its wheel's source."""
    lines = (SERVER_ARGS / f"{version}.txt").read_text().splitlines()
    return {line for line in lines if line and not line.startswith("#")}


def greedy_sampling() -> dict:
    """A prompts row's sampling columns at greedy: every sampling field neutral, temperature 0."""
    return {**{f.name: f.neutral for f in FIELDS}, "temperature": 0.0}


def run_generate(cfg: Config, shard: int, version: str, **env) -> subprocess.CompletedProcess:
    """`shardgen generate` of one shard on the fake SGLang of this version, its FAKE_SGLANG_* settings in env."""
    environ = {**os.environ, "PYTHONPATH": f"{FAKE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               "FAKE_SGLANG_VERSION": version, **env}
    argv = ["--config", str(cfg.write_resolved()), "generate", "--shard", str(shard), "--done",
            str(Layout(cfg.results).done(shard))]
    proc = preloaded.start(argv, environ)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def run(config, tmp_path):
    counts = build_prompts(config, tmp_path / "prompts")
    read = {n: pq.read_table(tmp_path / "prompts" / f"{n}.parquet").to_pylist()
            for n in ("prompts", "rejected", "duplicates", "sources")}
    return counts, read


def run_merge(layout):
    ds = layout.dataset_dir
    merge(layout, ds / "data.parquet", ds / "train.jsonl", layout.root / "merge" / "failed.parquet")
    assert not (ds / ".merge-spill").exists()
    return pq.read_table(ds / "data.parquet")


def generate(cfg, layout, fault=None, wait=True):
    """`shardgen generate` of shard 0 with SHARDGEN_FAULT=fault: (its exit status, its stderr), or the running
    process (preloaded.Process) if not wait."""
    env = {**os.environ, "SHARDGEN_LOCK_DIR": str(layout.root / "locks")}
    env.pop("SHARDGEN_FAULT", None)
    if fault:
        env["SHARDGEN_FAULT"] = fault
    proc = preloaded.start(["--config", str(cfg.write_resolved()), "generate", "--shard", "0", "--done",
                            str(layout.done(0))], env)
    if not wait:
        return proc
    _, err = proc.communicate(timeout=180)
    return proc.returncode, err


def committed(layout) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in layout.shard_dir(0).glob("part-*.parquet")}


# conversation id -> (system prompt or None, [(user, regenerated answer, original answer), ...])
CONVERSATIONS = {
    "c5": ("Answer in one sentence.", [(f"Question number {i}?", f"Regenerated answer {i}.", f"original {i}")
                                       for i in range(1, 6)]),
    "c2": (None, [("What is two plus two?", "Four it is.", "4"), ("And three?", "Five minus two.", "3")]),
    "c1": ("Be brief.", [("Name a colour.", "Blue.", "red")]),
}


TURN_COLUMNS = [("conversation_id", pa.string()), ("turn", pa.int32())]


def render(tokenizer, messages, generation_prompt=True) -> list[int]:
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)
    return tokenizer(text, add_special_tokens=False).input_ids


def end_of_turn(tokenizer) -> int:
    return tokenizer.convert_tokens_to_ids("<|im_end|>")


def dataset_rows(tokenizer, conversations=CONVERSATIONS) -> list[dict]:
    """Rows as the dataset contract has them: one per generated turn, messages = system, user 1, regenerated answer
    1, ..., user t; output_ids end with the end-of-turn stop token, as the engines return them."""
    rows = []
    for cid, (system, turns) in conversations.items():
        history = [{"role": "system", "content": system}] if system else []
        for t, (user, answer, original) in enumerate(turns, 1):
            messages = history + [{"role": "user", "content": user}]
            prompt_ids = render(tokenizer, messages)
            output_ids = tokenizer(answer, add_special_tokens=False).input_ids + [end_of_turn(tokenizer)]
            rows.append({"prompt_id": f"{cid}-t{t}", "gen_key": f"k-{cid}-{t}", "source": "s", "messages": messages,
                         "prompt_ids": prompt_ids, "completion": answer, "output_ids": output_ids,
                         "finish_reason": "stop", "prompt_tokens": len(prompt_ids),
                         "completion_tokens": len(output_ids), "reference": original,
                         "conversation_id": cid, "turn": t})
            history = messages + [{"role": "assistant", "content": answer}]
    return rows


def load(path):
    from datasets import load_dataset

    kind = "parquet" if path.suffix == ".parquet" else "json"
    return {r["id"]: r for r in load_dataset(kind, data_files=str(path), split="train")}


def stage(config: Config, shards: int) -> Layout:
    layout = Layout(config.results)
    build_prompts(config, layout.prompts_dir)
    split(layout.prompts, layout.split_dir, shards)
    for shard in range(shards):
        generate_shard(config, shard, layout.done(shard))
    return layout


def part_rows(layout: Layout) -> list[dict]:
    return [r for p in sorted(glob.glob(layout.parts_glob)) for r in pq.read_table(p).to_pylist()]


def check_results(work: Path) -> dict:
    """Exactly once, token totals equal to the parts, and the manifest balances."""
    res = work / "results"
    q = lambda sql: duckdb.sql(sql.replace("RES", str(res))).fetchall()  # noqa: E731
    # one row per generated turn (a first-turn source: turn 1 only), one turn 1 per prompt (conversation)
    assert q("""SELECT count(*) FILTER (turn = 1), count(DISTINCT prompt_id),
                       count(*) - count(DISTINCT (prompt_id, turn))
                FROM 'RES/dataset/*.parquet'""")[0] == \
        q("SELECT count(*), count(*), 0 FROM 'RES/prompts/prompts.parquet'")[0]
    assert q("""SELECT count(*) FROM 'RES/prompts/prompts.parquet' p
                ANTI JOIN 'RES/dataset/*.parquet' d USING (prompt_id)""")[0][0] == 0
    summary = json.loads((res / "report" / "summary.json").read_text())
    parts = q("""SELECT sum(prompt_tokens), sum(completion_tokens), count(DISTINCT gen_key), count(*),
                        count(DISTINCT base_key)
                 FROM 'RES/generate/shard-*/part-*.parquet' WHERE finish_reason IN ('stop', 'length')
                 AND base_key IN (SELECT gen_key FROM 'RES/prompts/prompts.parquet')""")[0]
    assert parts[2] == parts[3], "a gen_key was committed twice"
    assert (summary["dataset_prompt_tokens"], summary["dataset_completion_tokens"]) == parts[:2]
    assert summary["dataset_rows"] == parts[2], "a dataset row per generated turn"
    assert summary["generated"] == parts[4] and summary["failed"] == 0
    check_identities(summary)
    assert summary["prompts_read"] == (summary["prompts_accepted"] + summary["prompts_rejected"]
                                       + summary["prompts_duplicate"])
    manifest = json.loads((res / "report" / "manifest.json").read_text())
    assert sum(s["accepted"] for s in manifest["sources"]) == summary["prompts_accepted"] > 0, manifest["sources"]
    for source in manifest["sources"]:
        assert source["read"] == source["accepted"] + source["rejected"] + source["duplicates"], source
        assert source["accepted"] == source["generated"] + source["failed"], source
        assert sum(source["rejected_by_reason"].values()) == source["rejected"]
    outputs = {Path(o["path"]).name: o for o in manifest["outputs"]}
    assert set(outputs) == {"data.parquet", "train.jsonl", "failed.parquet", *EXPORTS, "manifest.json"}
    rows = {name: outputs[name]["rows"] for name in EXPORTS}
    assert rows["turns.jsonl"] == rows["turns.parquet"] == summary["dataset_rows"]  # a row per generated turn
    assert rows["tokens.jsonl"] == rows["tokens.parquet"] == summary["generated"]  # a row per conversation
    # the text exports: the conversations that have a turn before any cut by length (docs/trainers.md)
    assert rows["messages.jsonl"] == rows["sharegpt.jsonl"] <= summary["generated"]
    assert len(summary["per_shard"]) == 2
    return summary


def check_identities(summary: dict) -> None:
    """The headline is this dataset's tokens over its generation wall; every dataset row checked (one per generated
    turn: check_results counts them against the parts)."""
    wall, rate = summary["dataset_generation_wall_s"], summary["dataset_output_tokens_per_s"]
    assert abs(rate * wall - summary["dataset_completion_tokens"]) <= 0.05 * wall + 1e-3 * rate, summary
    assert summary["dataset_rows"] == summary["dataset_rows_checked"] >= summary["generated"], summary


# A chat template written after Qwen3's behaviour (tests/pipeline/test_thinking_template.py says which);
# QWEN3_CHAT_TEMPLATE=FILE puts another template file (say Qwen3's own) in its place.
QWEN3_STYLE = (
    "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- set ns = namespace(last_user=-1) %}"
    "{%- for m in messages %}{%- if m['role'] == 'user' %}{%- set ns.last_user = loop.index0 %}{%- endif %}"
    "{%- endfor %}"
    "{%- for m in messages %}"
    "{%- if m['role'] == 'user' %}{{- '<|im_start|>user\\n' + m['content'] + '<|im_end|>\\n' }}"
    "{%- elif m['role'] == 'assistant' %}"
    "{%- set content = m['content'] %}{%- set reasoning = '' %}"
    "{%- if '</think>' in content %}"
    "{%- set reasoning = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}"
    "{%- endif %}"
    "{%- if loop.index0 > ns.last_user and (loop.last or reasoning) %}"
    "{{- '<|im_start|>assistant\\n<think>\\n' + reasoning.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}"
    "{%- else %}{{- '<|im_start|>assistant\\n' + content }}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{%- endif %}")
TEMPLATE = Path(os.environ["QWEN3_CHAT_TEMPLATE"]).read_text() if os.environ.get("QWEN3_CHAT_TEMPLATE") else QWEN3_STYLE


def thinking_model(demo_model: Path, out: Path, template: str) -> Path:
    """The demo model's folder with `template` and <think>/</think> as single non-special added tokens, as in
    Qwen3's tokenizer (no weights: the engines that use it are fakes)."""
    from transformers import AddedToken, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(demo_model)
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in ("<think>", "</think>")])
    tokenizer.chat_template = template
    tokenizer.save_pretrained(out)
    config = json.loads((demo_model / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**config, "vocab_size": len(tokenizer)}))
    shutil.copy(demo_model / "generation_config.json", out / "generation_config.json")
    return out


class FakeEngine:
    """Test-only engine over a chat-template tokenizer: `reply(prompt text)` gives each request's answer text and
    finish reason; a stop adds the end-of-turn token, and the text is decoded from the ids as the real engines do.
    Every request's prompt_ids are kept in `prompts`."""

    def __init__(self, name: str, tokenizer, max_running_requests: int):
        from shardgen.engines import EngineInfo

        self.info = EngineInfo(name, max_running_requests=max_running_requests, record={"backend": name})
        self.tokenizer, self.prompts = tokenizer, []
        self.end = tokenizer.convert_tokens_to_ids("<|im_end|>")

    def reply(self, prompt: str) -> tuple[str, str]:
        raise NotImplementedError

    async def generate(self, request):
        from shardgen.engines import Result

        self.prompts.append(request.prompt_ids)
        text, reason = self.reply(self.tokenizer.decode(request.prompt_ids))
        ids = self.tokenizer(text, add_special_tokens=False).input_ids + ([self.end] if reason == "stop" else [])
        await asyncio.sleep(0)
        return Result(ids, self.tokenizer.decode(ids, skip_special_tokens=True), reason, len(request.prompt_ids))

    def run(self, coro):
        return asyncio.run(coro)

    def kill(self):
        raise AssertionError(f"the {self.info.backend} engine is never killed")

    def close(self):
        pass


def snakemake(workdir: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """The workflow copied to `workdir` (conftest.copy_workflow) run by this venv's `snakemake` on the demo config
    and workdir's config/test.yaml, with `args`; stdout and stderr together."""
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env.pop("SHARDGEN_FAULT", None)
    cmd = [str(bin_dir / "snakemake"), "--configfile", "config/demo.yaml", "config/test.yaml", "--cores", "2", *args]
    return subprocess.run(cmd, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout)


def generate_captured_shard(make_config, write_jsonl, monkeypatch, mamba_strategy: str, **env):
    """Five prompts through the SGLang adapter against tests/fake_sglang with capture.hidden_states on, one shard;
    the config and its layout once `generate` has run (and succeeded)."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("SHARDGEN_GPU_LOCK_DIR", str(Path(write_jsonl("x", [])).parent / "locks"))
    rows = [{"query": f"What is {i} plus {i + 1}? " + "why " * i} for i in range(5)]
    cfg = make_config([{"name": "q", "path": write_jsonl("q.jsonl", rows), "format": "query_response"}],
                      engine={"backend": "sglang", "mamba_strategy": mamba_strategy, "max_running_requests": 4,
                              "args": {}},
                      capture={"hidden_states": {"enabled": True}}, gpus=1, shards=1,
                      checkpoint={"every_records": 2, "every_seconds": 1})
    layout = Layout(cfg.results)
    build_prompts(cfg, layout.prompts_dir)
    split(layout.prompts, layout.split_dir, 1)
    proc = run_generate(cfg, 0, "0.5.17", **env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return cfg, layout
