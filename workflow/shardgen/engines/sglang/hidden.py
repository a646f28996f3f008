"""Hidden-state capture on SGLang (config `capture.hidden_states`) without patching SGLang: after a captured turn is
generated, one prefill pass over its prompt_ids + output_ids in the same engine, whose forward hooks
(engines/sglang/hidden_hooks.py, run in SGLang's scheduler process) copy the chosen layers for that request's extend
positions and hand them to this process through a file per request and chunk, in shared memory where the machine has
room for it. docs/engine.md "Hidden states on SGLang" gives the facts of SGLang's source this rests on, with file:line.

This is the engine's process's half: the server arguments, and each turn's pass, whose files it waits for on the
event loop and reads in a worker thread, so the driver keeps feeding."""

import asyncio
import hashlib
import json
import os
import shutil
import time
from pathlib import Path

from shardgen.capture import HiddenCapture
from shardgen.engines.sglang.hidden_hooks import HOOK_STATS, PASS_PREFIX, hook_specs
from shardgen.engines.sglang.results import result_of
from shardgen.engines.sglang.versions import spelling

PASS_FOLDER = "hidden-pass"  # under the engine's workdir: the hooks' files, each read back and removed at once
SHARED_MEMORY = Path("/dev/shm")
# The hand-off goes through shared memory only where it has room for the turns in flight (a container's default
# /dev/shm is 64 MiB): each turn's files are removed as soon as they are read.
SHARED_MEMORY_MIN_FREE = 8 << 30


def handoff_folder(workdir: Path) -> Path:
    """Shared memory where it has room (the files never touch a disk), else the engine's workdir; named by the
    workdir, so the next engine on it finds what a killed one left."""
    if SHARED_MEMORY.is_dir() and os.access(SHARED_MEMORY, os.W_OK) \
            and shutil.disk_usage(SHARED_MEMORY).free >= SHARED_MEMORY_MIN_FREE:
        digest = hashlib.sha256(str(workdir.resolve()).encode()).hexdigest()[:16]
        return SHARED_MEMORY / f"shardgen-{PASS_FOLDER}-{digest}"
    return workdir / PASS_FOLDER


def installed(config, model_config: dict, workdir: Path, version: str | None,
              args: dict) -> tuple[dict, "HiddenPass | None"]:
    """The server arguments with the hooks of the config's capture.hidden_states and the prefill CUDA graphs off
    (in `version`'s spelling: hooks do not run under a graph's replay), and its pass; None: capture off."""
    hidden = HiddenCapture.of(config)
    if hidden is None:
        return args, None
    capture = HiddenPass(hidden, model_config, workdir, args)
    graph_field, graph_off = spelling(version).prefill_graphs_off
    return {**args, "forward_hooks": capture.forward_hooks, graph_field: graph_off}, capture


async def attach(capture: "HiddenPass | None", engine, request, result) -> None:
    if capture is not None:
        await capture.attach(engine, request, result)


class HiddenPass:
    """The engine's side: the hook specs (ServerArgs.forward_hooks), and each captured turn's pass."""
    HANDOFF_WAIT_S = 120.0  # after its pass returns, how long a turn's last files may take to be written

    def __init__(self, hidden: HiddenCapture, model_config: dict, workdir: Path, engine_args: dict):
        if int(engine_args.get("tp_size") or 1) > 1 or int(engine_args.get("pp_size") or 1) > 1 \
                or engine_args.get("enable_dp_attention"):
            # tensor parallelism fuses the norms with the all-reduce (norm.forward_with_allreduce_fusion, no hook)
            # and runs every hook on each rank; DP attention reaches the layers through another path
            raise ValueError("capture.hidden_states on SGLang: one GPU per engine only (tp_size 1, pp_size 1, no "
                             "enable_dp_attention)")
        self.hidden, self.num_layers = hidden, int(model_config["num_hidden_layers"])
        self.layer_ids = hidden.layer_ids(self.num_layers)
        self.folder = handoff_folder(workdir)
        shutil.rmtree(self.folder, ignore_errors=True)  # one engine owns the workdir: a killed pass's files go
        self.folder.mkdir(parents=True)
        architecture = (model_config.get("architectures") or ["(none)"])[0]
        self.forward_hooks = hook_specs(architecture, self.layer_ids, self.num_layers, self.folder)
        self.header = hidden.header(self.num_layers)
        # Without a prefix cache nothing is matched, so the pass needs no input logprobs (they would put the logits
        # of every position, [positions, vocab] in float32, on the card); with one, logprobs from position 0 make
        # SGLang match no prefix (schedule_batch.py:1368-1372).
        self.logprob_args = {} if engine_args.get("disable_radix_cache") in (True, "True") else \
            {"return_logprob": True, "logprob_start_len": 0, "top_logprobs_num": 0}
        self.timing = {"turns": 0, "positions": 0, "pass_s": 0.0, "wait_s": 0.0, "read_s": 0.0, "encode_s": 0.0}

    async def attach(self, engine, request, result) -> None:
        """A generated result of a captured request gets its turn's stored states (Result.hidden_states); a failed
        or aborted one none (its turn is generated again, states and all)."""
        if not self.hidden.wants(request.source) or result.error is not None or result.finish_reason == "abort":
            return
        ids = list(request.prompt_ids) + list(result.output_ids)
        rid = PASS_PREFIX + request.rid
        started = time.perf_counter()
        out = await engine.async_generate(input_ids=ids, sampling_params={"max_new_tokens": 1}, rid=rid,
                                          **self.logprob_args)  # the one token generated is thrown away
        self.timing["pass_s"] += time.perf_counter() - started
        if (failed := result_of(out)).error is not None or failed.finish_reason == "abort":
            raise RuntimeError(f"{request.rid}: SGLang aborted the hidden-state pass over its turn ({failed.error})")
        waited = time.perf_counter()
        chunks = await self._written(rid, len(ids))
        self.timing["wait_s"] += time.perf_counter() - waited
        encoded = await asyncio.to_thread(self._read_and_encode, rid, chunks, len(ids))
        result.hidden_states = {**encoded, "header": self.header}
        self.timing["turns"] += 1
        self.timing["positions"] += len(ids)

    async def _written(self, rid: str, n: int) -> list[tuple[int, int, Path]]:
        """The files of `rid` once they hold every position 0..n-1 (the scheduler's writer thread may still be
        saving the last ones), or what there is after HANDOFF_WAIT_S. Waited for on the event loop: a thread per
        waiting turn would fight the driver for the interpreter."""
        deadline, chunks = time.monotonic() + self.HANDOFF_WAIT_S, self._chunks(rid)
        while sum(end - start for start, end, _ in chunks) < n and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
            chunks = self._chunks(rid)
        return chunks

    def _read_and_encode(self, rid: str, chunks: list[tuple[int, int, Path]], n: int) -> dict:
        started = time.perf_counter()
        states = self.collect(rid, chunks, n)
        read = time.perf_counter()
        encoded = self.hidden.encode(states)
        self.timing["read_s"] += read - started
        self.timing["encode_s"] += time.perf_counter() - read
        return encoded

    def collect(self, rid: str, chunks: list[tuple[int, int, Path]], n: int):
        """The pass's files of `rid` (`_written`), joined by position and removed; every position 0..n-1 must be
        there."""
        import torch
        from safetensors.torch import load_file

        states, seen = None, torch.zeros(n, dtype=torch.bool)
        for start, end, path in chunks:
            rows = load_file(str(path))["states"]
            if states is None:
                states = torch.empty((n, *rows.shape[1:]), dtype=rows.dtype)
            states[start:end], seen[start:end] = rows[:n - start], True
            path.unlink()
        if states is None or not bool(seen.all()):
            missing = n if states is None else int((~seen).sum())
            raise RuntimeError(f"{rid}: SGLang's forward hooks gave {missing} of the turn's {n} positions no hidden "
                               "states (a prefill under a CUDA graph, or a module path this adapter does not know)")
        return states

    def _chunks(self, rid: str) -> list[tuple[int, int, Path]]:
        """The files written for `rid` so far: (first position, end, path), by position."""
        chunks = []
        for path in self.folder.glob(f"{rid}.*.safetensors"):
            name, span, _ = path.name.rsplit(".", 2)
            if name == rid:
                start, end = span.split("-")
                chunks.append((int(start), int(end), path))
        return sorted(chunks)

    def record(self) -> dict:
        """The pass's time, split: `pass_s` the passes' own wall in the engine (overlapping one another and the
        generation), `wait_s` for the writer's last files after a pass returned, `read_s` and `encode_s` this
        process's work on the files (a worker thread), and the scheduler
        side's counters (`hook`): `scheduler_s` what the hooks held the scheduler's loop for, `write_s` the writer
        thread's time, and the chunks, positions and bytes handed off."""
        stats = self.folder / HOOK_STATS
        return {**{k: round(v, 3) if isinstance(v, float) else v for k, v in self.timing.items()},
                "folder": str(self.folder), "logprobs_in_pass": bool(self.logprob_args),
                "hook": json.loads(stats.read_text()) if stats.exists() else {}}

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
