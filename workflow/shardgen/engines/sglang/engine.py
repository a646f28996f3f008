"""Production engine: one in-process sglang.Engine per shard job, fed through the shared async driver.

Imported only after the GPU lease has set CUDA_VISIBLE_DEVICES. SGLang kills its whole process tree (this
process included) when its scheduler dies: that surfaces as rc 137 and is left to the workflow's retries."""

import asyncio
import dataclasses
import json
import logging
import os
import signal
from collections.abc import Sequence
from pathlib import Path

from shardgen.capture import Capture
from shardgen.config.sections import EngineConfig
from shardgen.engines import EngineInfo, Request, Result, telemetry
from shardgen.engines.kernel_cache import point_caches, resolve
from shardgen.engines.logtap import LogTap
from shardgen.engines.retractions import Retractions
from shardgen.engines.scoring import ScoreRequest, Scores
from shardgen.engines.sglang import hidden, log_lines, mamba_auto, running_cap, scoring, tune
from shardgen.engines.sglang.advice import advice, pools
from shardgen.engines.sglang.args import build_server_args, server_arg_names
from shardgen.engines.sglang.record import RESOLVED_KEYS, info_from_record, numerics, numerics_changes, ran_with
from shardgen.engines.sglang.results import request_capture_args, result_of
from shardgen.engines.sglang.settings import mamba_strategy, with_mamba_strategy
from shardgen.engines.sglang.versions import untested

log = logging.getLogger(__name__)
OOM_MEMORY_STEP, OOM_CAP_FACTOR = 0.03, 0.75  # per out-of-memory death in a row: memory_share, running cap


class SGLangEngine:
    tune_grid = staticmethod(tune.grid)  # what `shardgen tune` measures
    pools, advice = staticmethod(pools), staticmethod(advice)  # `shardgen diagnose` asks
    read_log_line = staticmethod(log_lines.read)  # the watchdog, the done record and `shardgen diagnose` ask
    # a done record read back, and what in a config's settings changes the numbers (record.py: no engine needed)
    info_from_record, ran_with = staticmethod(info_from_record), staticmethod(ran_with)
    numerics, numerics_changes = staticmethod(numerics), staticmethod(numerics_changes)

    def __init__(self, config, model, workdir: Path, *, device: str = "cuda", watchdog=None,
                 extra_sampling: dict | None = None, work: Sequence[dict] = ()):
        engine = config.engine
        self.auto: mamba_auto.AutoChoice | None = None
        self.cap_auto: running_cap.CapChoice | None = None  # sized whenever auto is
        self.prefill_auto: running_cap.PrefillChoice | None = None
        if mamba_strategy(engine) == "auto":
            self.auto = mamba_auto.resolve(work)
            engine = with_mamba_strategy(engine, self.auto.strategy)
            log.info("mamba_strategy auto: %s, as %s", self.auto.strategy, self.auto.why)
        os.environ.setdefault("SGLANG_LOG_MS", "1")  # millisecond timestamps on the scheduler's lines
        self.cache_env = point_caches(resolve(config.engine.cache_dir, config.results))
        import sglang
        from sglang.srt.server_args import ServerArgs
        from sglang.srt.utils import get_device_memory_capacity  # MiB, from nvidia-smi: no CUDA context here

        names, version = server_arg_names(ServerArgs), getattr(sglang, "__version__", None)
        if warning := untested(version):
            log.warning(warning)
        # What the sizing reads, once: the model's shape and the GPU's memory.
        model_config = json.loads((Path(model.path) / "config.json").read_text())
        gpu_mib = get_device_memory_capacity()
        if self.auto:
            engine = self._size_running_cap(engine, model_config, gpu_mib, work)
        if "prefill_max_requests" in names:
            engine = self._limit_prefill(engine, model_config, gpu_mib)
        self.args, self.hidden = hidden.installed(config, model_config, workdir, version, build_server_args(
            engine, str(model.path), names, version, seed=config.seed, trust_remote_code=model.trust_remote_code))
        self.stop_ids, self.extra_sampling = model.stop_token_ids, extra_sampling or {}
        self.capture, self.watchdog = Capture.of(config), watchdog
        self.startup: dict = {}
        self.retractions = Retractions()  # what the scheduler's retraction lines say, for the done record
        workdir.mkdir(parents=True, exist_ok=True)
        self.telemetry = telemetry.TelemetryWriter(workdir)
        self.tap = LogTap(self._on_line)
        try:
            self.engine = sglang.Engine(**self.args)
            server = self.engine.get_server_info()  # synchronous: read before the driver's loop runs
        except BaseException:
            self._close_taps()
            raise
        import torch

        self.info = self._info(server, version or server.get("version"),
                               torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)

    def _info(self, server: dict, version: str | None, gpu_name: str | None) -> EngineInfo:
        # Each data-parallel rank runs its own scheduler with this cap: the engine runs dp_size times it at once.
        state = (server.get("internal_states") or [{}])[0]
        per_rank = int(state.get("effective_max_running_requests_per_dp") or self.startup.get("max_running_requests")
                       or server["max_running_requests"])
        capacity = per_rank * int(server.get("dp_size") or 1)
        resolved = {k: server[k] for k in RESOLVED_KEYS if k in server}
        record = {"backend": "sglang", "version": version, "max_running_requests": capacity,
                  "server_args": self.args, "resolved": resolved, "startup": self.startup,
                  "cache_dir": os.path.dirname(self.cache_env["TRITON_CACHE_DIR"]), "gpu_name": gpu_name}
        if self.auto:
            record["mamba_strategy_auto"] = self.auto.as_dict()
        if self.cap_auto:  # sized whenever auto is (__init__)
            record["running_cap_auto"] = self.cap_auto.as_dict()
        if self.prefill_auto:
            record["prefill_limit_auto"] = self.prefill_auto.as_dict()
        return self.info_from_record(record)

    def _size_running_cap(self, engine: EngineConfig, model_config: dict, gpu_mib: float | None,
                          work: Sequence[dict]) -> EngineConfig:
        """`auto`'s running cap, sized before the start: the pools cannot change once it runs (running_cap.py)."""
        chosen = self.cap_auto = running_cap.choose(engine, model_config, work, gpu_mib)
        log.info("running cap auto: %s, as %s", chosen.max_running_requests or "SGLang's own", chosen.why)
        if chosen.max_running_requests is None:
            return engine
        pool = {"max_mamba_cache_size": chosen.max_mamba_cache_size} if chosen.max_mamba_cache_size else {}
        return dataclasses.replace(engine, max_running_requests=chosen.max_running_requests,
                                   args={**engine.args, **pool})

    def _limit_prefill(self, engine: EngineConfig, model_config: dict, gpu_mib: float | None) -> EngineConfig:
        """Under a prefix cache, at most as many admissions per prefill batch as their state copies fit beside the
        static pools (running_cap.prefill_limit): the default run must not die out of memory there."""
        chosen = self.prefill_auto = running_cap.prefill_limit(engine, model_config, gpu_mib)
        log.info("prefill limit auto: %s, as %s", chosen.prefill_max_requests or "SGLang's own", chosen.why)
        if (limit := chosen.prefill_max_requests) is None:
            return engine
        return dataclasses.replace(engine, args={**engine.args, "prefill_max_requests": limit})

    @classmethod
    def after_oom(cls, engine: EngineConfig, ooms: int, last_cap: int | None) -> EngineConfig:
        """Less static memory and a lower running cap, a step per death: SGLang sizes its KV and mamba pools
        from memory_share (its mem_fraction_static), and the cap bounds what one decode step allocates beside them."""
        cap = engine.max_running_requests or last_cap
        return dataclasses.replace(
            engine, memory_share=round(engine.memory_share - OOM_MEMORY_STEP * ooms, 4),
            max_running_requests=max(1, int(cap * OOM_CAP_FACTOR ** ooms)) if cap else None)

    def _on_line(self, line: str) -> None:
        reading = self.read_log_line(line)
        if reading.row:
            self.telemetry.add(reading.row)
        self.startup.update(reading.facts)
        if reading.retraction:
            self.retractions.add(reading.retraction)
        if self.watchdog:
            self.watchdog.saw(line, reading)

    def run(self, coro):
        return (getattr(self.engine, "loop", None) or asyncio.get_event_loop()).run_until_complete(coro)

    async def generate(self, request: Request) -> Result:
        sampling = {**request.sampling, "stop_token_ids": self.stop_ids, **self.extra_sampling}
        mode = self.capture.mode(request.source) if self.capture else None
        result = self._kept(result_of(await self.engine.async_generate(
            input_ids=request.prompt_ids, sampling_params=sampling, rid=request.rid,
            **request_capture_args(self.capture, mode))), mode)
        await hidden.attach(self.hidden, self.engine, request, result)  # a captured turn's states
        self.telemetry.completed(len(result.output_ids))
        if self.watchdog:
            self.watchdog.progress()
        return result

    def generate_all(self, prompt_ids: list[list[int]], sampling: list[dict]) -> list[Result]:
        """SGLang's own batch call, `Engine.generate(list)`, with nothing of shardgen's around it: the bare engine a
        benchmark compares shardgen's driver against, asking what a request without a source asks (Capture.mode).
        Blocks until every prompt is done; results in input order."""
        params = [{**s, "stop_token_ids": self.stop_ids, **self.extra_sampling} for s in sampling]
        mode = self.capture.mode(None) if self.capture else None
        return [self._kept(result_of(out), mode) for out in self.engine.generate(
            input_ids=prompt_ids, sampling_params=params, **request_capture_args(self.capture, mode))]

    @staticmethod
    def _kept(result: Result, mode: str | None) -> Result:
        """For the signal alone, the chosen logprobs without the (empty) top-k lists: capture.signal_only."""
        return dataclasses.replace(result, top_ids=None, top_logprobs=None) if mode == "signal" else result

    def score(self, requests: list[ScoreRequest], top_k: int) -> list[Scores]:
        """Prefill only, in chunks of SGLang's batch call (scoring.py)."""
        scored = []
        for chunk in scoring.chunks(requests):
            outputs = self.engine.generate(**scoring.generate_args(chunk, top_k))
            scored += [scoring.scores_of(r, out["meta_info"], top_k) for r, out in zip(chunk, outputs)]
        return scored

    def flush_telemetry(self) -> None:
        """Write the telemetry seen so far (a benchmark reads it between runs on one engine)."""
        self.telemetry.flush()

    def kill(self) -> None:
        self.flush_telemetry()  # what was seen so far survives
        self.tap.settle()  # and the job's log keeps the line that said why (the watchdog's)
        from sglang.srt.utils import kill_process_tree
        kill_process_tree(os.getpid(), include_parent=True)
        os.kill(os.getpid(), signal.SIGKILL)

    def _close_taps(self) -> None:
        self.tap.close()
        self.telemetry.close()

    def close(self) -> None:
        try:
            self.engine.shutdown()
        finally:
            self._close_taps()  # every line read: the record gets the run's retractions (its done file's engine)
            self.info.record["retractions"] = self.retractions.as_dict()
            if self.hidden is not None:
                self.info.record["hidden_pass"] = self.hidden.record()
                self.hidden.close()
