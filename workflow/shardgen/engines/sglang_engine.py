"""Production engine: one in-process sglang.Engine per shard job, fed through the shared async driver.

Imported only after the GPU lease has set CUDA_VISIBLE_DEVICES. SGLang kills its whole process tree (this
process included) when its scheduler dies: that surfaces as rc 137 and is left to the workflow's retries."""

import asyncio
import os
import signal
from pathlib import Path

from shardgen.engines import Request, Result, telemetry
from shardgen.engines.kernel_cache import point_caches
from shardgen.engines.logtap import LogTap
from shardgen.config_sections import EngineConfig
from shardgen.engines.sglang_args import build_server_args, server_arg_names

RESOLVED_KEYS = ("max_running_requests", "max_total_tokens", "mem_fraction_static", "chunked_prefill_size",
                 "max_prefill_tokens", "disable_radix_cache", "disable_overlap_schedule", "mamba_scheduler_strategy",
                 "mamba_radix_cache_strategy", "mamba_full_memory_ratio", "max_mamba_cache_size", "mamba_ssm_dtype",
                 "cuda_graph_max_bs", "cuda_graph_max_bs_decode", "attention_backend", "page_size", "random_seed",
                 "tp_size", "dtype", "load_format", "schedule_policy", "version")


class SGLangEngine:
    def __init__(self, engine: EngineConfig, model, shard_dir: Path, *, seed: int, cache_dir: Path,
                 extra_sampling: dict | None = None, watchdog=None):
        os.environ.setdefault("SGLANG_LOG_MS", "1")  # millisecond timestamps on the scheduler's lines
        self.cache_env = point_caches(cache_dir)
        import sglang
        from sglang.srt.server_args import ServerArgs

        self.args = build_server_args(engine, str(model.path), server_arg_names(ServerArgs), seed=seed,
                                      trust_remote_code=model.trust_remote_code)
        self.stop_ids = model.stop_token_ids
        self.extra_sampling = extra_sampling or {}
        self.startup: dict = {}
        self.watchdog = watchdog
        shard_dir.mkdir(parents=True, exist_ok=True)
        self.telemetry = telemetry.TelemetryWriter(shard_dir)
        self.tap = LogTap(self._on_line)
        try:
            self.engine = sglang.Engine(**self.args)
            info = self.engine.get_server_info()  # synchronous: read before the driver's loop runs
        except BaseException:
            self._close_taps()
            raise
        state = (info.get("internal_states") or [{}])[0]
        self.max_running_requests = int(state.get("effective_max_running_requests_per_dp")
                                        or self.startup.get("max_running_requests") or info["max_running_requests"])
        self.resolved = {k: info[k] for k in RESOLVED_KEYS if k in info}
        self.version = getattr(sglang, "__version__", info.get("version"))
        import torch

        self.gpu_name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None  # for the peaks table

    def _on_line(self, line: str) -> None:
        if row := telemetry.parse_line(line):
            self.telemetry.add(row)
        else:
            telemetry.parse_startup(line, self.startup)
        if self.watchdog:
            self.watchdog.saw_line(line, row)

    def describe(self) -> dict:
        return {"backend": "sglang", "version": self.version, "max_running_requests": self.max_running_requests,
                "server_args": self.args, "resolved": self.resolved, "startup": self.startup,
                "cache_dir": os.path.dirname(self.cache_env["TRITON_CACHE_DIR"]),
                "gpu_name": self.gpu_name}

    def run(self, coro):
        loop = getattr(self.engine, "loop", None) or asyncio.get_event_loop()
        return loop.run_until_complete(coro)

    async def generate(self, request: Request) -> Result:
        sampling = {**request.sampling, "stop_token_ids": self.stop_ids, **self.extra_sampling}
        result = _result(await self.engine.async_generate(input_ids=request.prompt_ids, sampling_params=sampling,
                                                          rid=request.rid))
        self.telemetry.completed(len(result.output_ids))
        if self.watchdog:
            self.watchdog.progress()
        return result

    def generate_all(self, prompt_ids: list[list[int]], sampling: list[dict]) -> list[Result]:
        """SGLang's own batch call, `Engine.generate(list)`, with nothing of shardgen's around it: the bare engine a
        benchmark compares shardgen's driver against. Blocks until every prompt is done; results in input order."""
        params = [{**s, "stop_token_ids": self.stop_ids, **self.extra_sampling} for s in sampling]
        return [_result(out) for out in self.engine.generate(input_ids=prompt_ids, sampling_params=params)]

    def flush_telemetry(self) -> None:
        self.telemetry.flush()

    def kill(self) -> None:
        self.flush_telemetry()  # what was seen so far survives
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
            self._close_taps()


def _result(out: dict) -> Result:
    """One SGLang output dict as a Result; the contract keeps the stop token, which SGLang may leave out."""
    meta = out["meta_info"]
    finish = meta.get("finish_reason") or {}
    kind = finish.get("type") if isinstance(finish, dict) else str(finish)
    output_ids = list(out.get("output_ids") or [])
    matched = finish.get("matched") if isinstance(finish, dict) else None
    if kind == "stop" and isinstance(matched, int) and (not output_ids or output_ids[-1] != matched):
        output_ids.append(matched)
    error = None
    if kind not in ("stop", "length"):
        error = (finish.get("message") if isinstance(finish, dict) else None) or f"finish_reason {finish!r}"
    return Result(output_ids, out.get("text", ""), kind if error is None else "abort", meta["prompt_tokens"],
                  meta.get("cached_tokens") or 0, error)
