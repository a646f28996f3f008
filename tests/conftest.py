import json
import lzma
import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
import yaml

# Three test workers share the machine's cores (pyproject: -n 3): a torch in each with a thread per core would
# oversubscribe them, its threads spinning while they wait for each other. One thread each, as Snakemake gives a job
# of one thread (it sets OMP_NUM_THREADS to the rule's threads); set before a test imports torch, and inherited by
# the commands the tests start.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# Hooks and fixtures of the parallel run (tests/parallel.py), found by pytest here.
from parallel import (built_once, own_gpu_locks, pytest_collection_modifyitems,  # noqa: F401
                      pytest_xdist_make_scheduler)

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "config" / "demo"
FAKE = Path(__file__).resolve().parent / "fake_sglang"
QWEN3 = REPO / "tests" / "data" / "qwen3"  # Qwen3's own tokenizer, template and generation config
BIN = Path(sys.executable).parent


@pytest.fixture(autouse=True)
def no_config_from_another_test(monkeypatch):
    """A test that starts a run (run_start.prepare_run) names its resolved config in $SHARDGEN_CONFIG, as the
    workflow does for its steps; a later test in the same worker must not read it as its own."""
    monkeypatch.delenv("SHARDGEN_CONFIG", raising=False)


@pytest.fixture(scope="session")
def demo_model(tmp_path_factory) -> Path:
    from shardgen.model.demo import build

    return built_once(tmp_path_factory, "demo-model", lambda out: build(out, DEMO / "corpus.txt"))


@pytest.fixture(scope="session")
def finished_demo(tmp_path_factory) -> Path:
    """The demo (config/demo.yaml, 2 shards) run by the `snakemake` CLI in a copy of the workflow, once per
    session, with what it printed in demo-run.out. Read it; to change anything in it, copy it first
    (shutil.copytree, symlinks=True: mtimes are kept). On one core (`--cores 1`), as on a 1-core machine: its
    shards generate one after another, which test_workflow's check of the run's clock reads (the runs of the
    README's steps and of the hidden-states demo take every core)."""
    def run(work: Path) -> None:
        work.mkdir()
        copy_workflow(work)
        (work / "config" / "test.yaml").write_text("shards: 2\n")
        with own_group(demo_snakemake(work, "--cores", "1", start_new_session=True)) as proc:
            out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out[-4000:]
        (work / "demo-run.out").write_text(out)  # what the user saw

    return built_once(tmp_path_factory, "finished-demo", run)


def demo_snakemake(workdir: Path, *args, **popen) -> subprocess.Popen:
    """This venv's `snakemake` on the demo config and workdir's config/test.yaml, with `args`; stdout and stderr
    together."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    cmd = [str(BIN / "snakemake"), "--configfile", "config/demo.yaml", "config/test.yaml", *args]
    return subprocess.Popen(cmd, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            **popen)


@pytest.fixture
def make_config(tmp_path, demo_model):
    """A validated Config for the demo model, results under tmp_path, with the given sources and overrides."""
    from shardgen.config import Config

    def make(sources, **overrides):
        raw = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
        raw.update(results_dir=str(tmp_path / "results"), sources=sources)
        raw["model"]["path"] = str(demo_model)
        for key, value in overrides.items():
            raw[key] = {**raw[key], **value} if isinstance(value, dict) and isinstance(raw.get(key), dict) else value
        return Config.from_dict(raw)

    return make


@pytest.fixture
def write_jsonl(tmp_path):
    def write(name, rows):
        path = tmp_path / name
        path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
        return str(path)

    return write


def load_yaml_files(*paths) -> dict:
    """Config files merged the way Snakemake's --configfile merges them (later files update earlier, recursively)."""
    def update(base: dict, new: dict) -> None:
        for key, value in new.items():
            if isinstance(value, dict) and isinstance(base.get(key), dict):
                update(base[key], value)
            else:
                base[key] = value

    merged: dict = {}
    for path in paths:
        update(merged, yaml.safe_load(Path(path).read_text()) or {})
    return merged


def copy_workflow(dest: Path, demo_model: Path | None = None, results: str = "results") -> Path:
    """The repository's workflow files (no results) in dest, for snakemake runs in isolation. With demo_model (the
    session's, conftest.demo_model), the demo's model is already in `results`/demo-model, newer than its corpus:
    Snakemake does not build it again, for the runs whose point is a later step (finished_demo and the README's
    steps build it)."""
    for name in ("Snakefile", "workflow", "config", "profiles", "envs"):
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy(src, dest / name)
    if demo_model is not None:
        shutil.copytree(demo_model, dest / results / "demo-model")
    return dest


def wait_for(proc: subprocess.Popen, found, what: str, timeout: float = 240, poll_s: float = 0.2):
    """Poll found() until it returns something true, and return it, while proc (text stdout) runs. Fails with its
    output if it ends first, or naming `what` after timeout seconds (its output is not read then: it is still
    running, and a read would wait for it)."""
    deadline = time.monotonic() + timeout
    while not (result := found()):
        if proc.poll() is not None:
            raise AssertionError(f"ended (rc {proc.returncode}) before {what}: {proc.stdout.read()[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} in {timeout:.0f} s")
        time.sleep(poll_s)
    return result


@contextmanager
def own_group(proc: subprocess.Popen, grace_s: float = 30.0):
    """A child started with start_new_session=True: when the block ends with the child still running (a timeout,
    a failed assertion), its whole process group is ended: SIGINT first (Snakemake then cancels its jobs), SIGKILL
    after grace_s. No snakemake outlives its test."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                pass
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # what is left of the group: the child's own children
        proc.wait()


# A demo run's overlay for the SGLang adapter against tests/fake_sglang (a model with NemotronH's module names whose
# forward runs the hooks): one engine on one leased fake GPU, the shards taking turns on it. No GPU runs.
FAKE_SGLANG_DEMO = {"gpus": 1, "engine": {"backend": "sglang", "memory_share": 0.5, "max_running_requests": 4,
                                          "sglang": {"mamba_strategy": "no_buffer"}, "args": {}}}


def fake_sglang_run(env: pytest.MonkeyPatch, work: Path, **fake_settings: str) -> tuple[str, ...]:
    """The environment of a `snakemake` run in work on FAKE_SGLANG_DEMO (with FAKE_SGLANG_* settings), set in env;
    returns the run's arguments (the one fake GPU)."""
    env.setenv("PYTHONPATH", str(FAKE))
    env.setenv("FAKE_SGLANG_VERSION", "0.5.17")
    env.setenv("SHARDGEN_GPU_LOCK_DIR", str(work / "gpu-locks"))
    env.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    for name, value in fake_settings.items():
        env.setenv(name, value)
    return ("--resources", "gpu=1")


@pytest.fixture
def fake_sglang(monkeypatch):
    """tests/fake_sglang imported as `sglang`, and no compiled-kernel cache variable set."""
    from shardgen.engines.kernel_cache import CACHE_VARS

    monkeypatch.syspath_prepend(str(FAKE))
    for name in [m for m in sys.modules if m == "sglang" or m.startswith("sglang.")]:
        monkeypatch.delitem(sys.modules, name)
    for var in CACHE_VARS:  # set then removed: monkeypatch restores each to its state before the test
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)


# The model folders of the scripted runs of tests/merge/merge_runs.py.
@pytest.fixture(scope="module")
def qwen3_model(demo_model, tmp_path_factory) -> Path:
    """The demo model's folder with the Qwen3-style template of tests/pipeline/test_thinking_template.py (or
    QWEN3_CHAT_TEMPLATE's file) and <think>/</think> as single non-special added tokens, as in Qwen3's tokenizer
    (no weights: the engines of these tests are scripted). Qwen3's own template renders an assistant message's
    `reasoning_content` where it has one and splits its content at `</think>` only where not; the written one
    has only the split, so that branch is added here (Qwen3's own file already has it)."""
    from helpers import QWEN3_STYLE, TEMPLATE, thinking_model

    template, split = TEMPLATE, "{%- if '</think>' in content %}"
    if template == QWEN3_STYLE:
        assert split in template
        template = template.replace(split, "{%- if m['reasoning_content'] is string %}"
                                           "{%- set reasoning = m['reasoning_content'] %}"
                                           "{%- elif '</think>' in content %}")
    return thinking_model(demo_model, tmp_path_factory.mktemp("qwen3") / "model", template)


@pytest.fixture(scope="module")
def qwen3_real_model(demo_model, tmp_path_factory) -> Path:
    """A model folder with Qwen3's own tokenizer, chat template and generation config (tests/data/qwen3) and the
    demo model's config at Qwen3's vocabulary (no weights: the engines of these tests are scripted). Its name holds
    "qwen", as a Qwen3 checkpoint's does: FastChat picks its conversation template by the model path."""
    out = tmp_path_factory.mktemp("real") / "qwen3"
    out.mkdir()
    (out / "tokenizer.json").write_bytes(lzma.decompress((QWEN3 / "tokenizer.json.xz").read_bytes()))
    for name in ("tokenizer_config.json", "generation_config.json"):
        shutil.copy(QWEN3 / name, out / name)
    config = json.loads((demo_model / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**config, "vocab_size": 151669}))
    return out
