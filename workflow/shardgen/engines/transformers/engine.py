"""CPU engine: batched Hugging Face `generate`, fed asynchronously like the GPU engine so one driver serves both."""

import asyncio
import dataclasses
import json
import logging
import os
import signal
from collections.abc import Sequence
from pathlib import Path

from shardgen.capture import Capture, HiddenCapture
from shardgen.config.sections import EngineConfig
from shardgen.engines import EngineInfo, LogLine, Request, Result, RunSettings, recorded_numerics
from shardgen.engines.advice import NoAdvice
from shardgen.engines.scoring import ScoreRequest, Scores, temperature
from shardgen.engines.transformers import hidden, scoring
from shardgen.engines.transformers.args import check_args, hf_sampling
from shardgen.engines.transformers.recorder import logprob_recorder
from shardgen.faults import engine_abort_marker

log = logging.getLogger(__name__)
DEFAULT_BATCH = 8
# transformers warns that each Mamba op falls back to its PyTorch reference: on the CPU that is all there is
logging.getLogger("transformers.integrations.hub_kernels").setLevel(logging.ERROR)
class TransformersEngine(NoAdvice):
    def __init__(self, config, model, workdir: Path, *, device: str = "cpu", watchdog=None,
                 extra_sampling: dict | None = None, work: Sequence[dict] = ()):
        if extra_sampling:
            raise ValueError(f"the transformers backend takes no extra sampling parameters ({extra_sampling})")
        import torch
        from transformers import AutoModelForCausalLM

        self.max_running_requests = config.engine.max_running_requests or DEFAULT_BATCH
        self.args = {"device": device, **check_args(config.engine.args)}
        torch.manual_seed(config.seed)
        self.torch, self.model_info = torch, model
        # transformers' annotations give PreTrainedModel.to a model where torch's Module.to takes a device
        self.model = AutoModelForCausalLM.from_pretrained(model.path, trust_remote_code=model.trust_remote_code,
                                                          dtype=getattr(torch, self.args["dtype"])).to(device).eval()  # type: ignore[arg-type]
        self.capture, self.hidden = Capture.of(config), HiddenCapture.of(config)
        self.stop_ids = set(model.stop_token_ids)
        self.pad_id = model.tokenizer.pad_token_id if model.tokenizer.pad_token_id is not None else 0
        self.info = self.info_from_record({"backend": "transformers", "max_running_requests": self.max_running_requests,
                                           **self.args, **self._cache_dtypes()})
        self._pending: list[tuple[Request, asyncio.Future]] = []
        self._wakeup: asyncio.Event | None = None
        self._batcher: asyncio.Task | None = None
        self.watchdog = watchdog

    def _cache_dtypes(self) -> dict:
        """The dtypes the generation cache holds, read from a real one (a two-token forward), since HF keeps some
        state in other dtypes than the weights (NemotronH's SSM state is float32 under bfloat16 weights): attention
        keys/values, Mamba recurrent (SSM) state and conv state; None, with `dtypes_note`, where it holds none."""
        torch = self.torch
        with torch.inference_mode():
            out = self.model(torch.full((1, 2), self.pad_id, device=self.args["device"]), use_cache=True)
        cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
        found: dict[str, set[str]] = {"kv_cache_dtype": set(), "ssm_state_dtype": set(), "conv_state_dtype": set()}
        for layer in getattr(cache, "layers", ()):
            for attr, key in (("keys", "kv_cache_dtype"), ("values", "kv_cache_dtype"),
                              ("recurrent_states", "ssm_state_dtype"), ("conv_states", "conv_state_dtype")):
                value = getattr(layer, attr, None)
                for tensor in value.values() if isinstance(value, dict) else [value]:
                    if isinstance(tensor, torch.Tensor):
                        found[key].add(str(tensor.dtype).removeprefix("torch."))
        dtypes = {key: ",".join(sorted(kinds)) or None for key, kinds in found.items()}
        if missing := [key for key, dtype in dtypes.items() if dtype is None]:
            dtypes["dtypes_note"] = (f"{', '.join(missing)}: null, the model's generation cache "
                                     f"({type(cache).__name__}) holds no such tensor")
        return dtypes

    @classmethod
    def info_from_record(cls, record: dict) -> EngineInfo:
        return EngineInfo("transformers", record["max_running_requests"], record=record, settings=RunSettings(
            prefix_cache=False, weights_dtype=record.get("dtype"), kv_cache_dtype=record.get("kv_cache_dtype"),
            ssm_state_dtype=record.get("ssm_state_dtype")))

    @classmethod
    def numerics(cls, record: dict, model_dir: Path) -> dict:
        """The dtypes it recorded running with, and a note where one is missing."""
        return recorded_numerics(record)

    @classmethod
    def read_log_line(cls, line: str) -> LogLine:
        """Nothing: this engine logs no batch lines; its progress is its completions."""
        return LogLine()

    @classmethod
    def after_oom(cls, engine: EngineConfig, ooms: int, last_cap: int | None) -> EngineConfig:
        """A smaller batch, a quarter less per death: the batch is all this backend holds in memory."""
        cap = engine.max_running_requests or last_cap or DEFAULT_BATCH
        return dataclasses.replace(engine, max_running_requests=max(1, int(cap * 0.75 ** ooms)))

    @classmethod
    def numerics_changes(cls, engine: dict, model_path) -> list[str]:
        return []  # runs the model in the dtype the user names; nothing of its own changes the numbers

    def run(self, coro):
        return asyncio.run(coro)

    async def generate(self, request: Request) -> Result:
        if self._batcher is None:
            self._wakeup = asyncio.Event()
            self._batcher = asyncio.create_task(self._run_batches(self._wakeup))
        future = asyncio.get_running_loop().create_future()
        self._pending.append((request, future))
        assert self._wakeup is not None  # made with the batcher, above
        self._wakeup.set()
        return await future

    async def _run_batches(self, wakeup: asyncio.Event) -> None:
        while True:
            await wakeup.wait()
            wakeup.clear()
            while self._pending:
                batch = self._take_batch()
                try:
                    results = await asyncio.to_thread(self._generate_batch, [r for r, _ in batch])
                except Exception as err:  # one failing batch fails its requests, not the run
                    log.exception("batch of %d failed", len(batch))
                    results = [Result([], "", "abort", len(r.prompt_ids), error=f"{type(err).__name__}: {err}")
                               for r, _ in batch]
                for (_, future), result in zip(batch, results):
                    if not future.done():
                        future.set_result(result)
                if self.watchdog:
                    self.watchdog.progress()

    def score(self, requests: list[ScoreRequest], top_k: int) -> list[Scores]:
        return scoring.score(self.model, requests, top_k, self.args["device"])

    def _take_batch(self) -> list:
        # HF generate takes one sampling config and one logits processor per call: batch requests that share a
        # sampling and whether they are captured.
        def key(request: Request) -> str:
            return json.dumps([request.sampling, self._mode(request)], sort_keys=True)

        first = key(self._pending[0][0])
        batch: list[tuple[Request, asyncio.Future]] = []
        rest: list[tuple[Request, asyncio.Future]] = []
        for item in self._pending:
            same = key(item[0]) == first
            (batch if same and len(batch) < self.max_running_requests else rest).append(item)
        self._pending = rest
        return batch

    def _generate_batch(self, requests: list[Request]) -> list[Result]:
        torch = self.torch
        width = max(len(r.prompt_ids) for r in requests)
        ids = torch.full((len(requests), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, r in enumerate(requests):  # left padding, so every row's generation starts at `width`
            ids[i, width - len(r.prompt_ids):] = torch.tensor(r.prompt_ids)
            mask[i, width - len(r.prompt_ids):] = 1
        mode = self._mode(requests[0])
        at = temperature(requests[0].sampling)
        recorder = logprob_recorder(at, mode, self.capture.top_k) if mode and self.capture else None
        with torch.inference_mode():
            out = self.model.generate(ids, attention_mask=mask, **hf_sampling(requests[0].sampling),
                                      eos_token_id=sorted(self.stop_ids), pad_token_id=self.pad_id,
                                      **({"logits_processor": [recorder]} if recorder else {}))
        captured = recorder.rows(out) if recorder else [{}] * len(requests)
        results = [self._result(r, out[i, width:].tolist(), captured[i]) for i, r in enumerate(requests)]
        if self.hidden:
            timing = self.info.record.setdefault("hidden_pass", {"turns": 0, "positions": 0, "pass_s": 0.0})
            hidden.attach(self.model, self.hidden, requests, results, self.args["device"], timing)
        return results

    def _mode(self, request: Request) -> str | None:
        """What the request asks for (capture.Capture.mode): tokens, signal or nothing."""
        return self.capture.mode(request.source) if self.capture else None

    def _result(self, request: Request, generated: list[int], captured: dict | None = None) -> Result:
        if (marker := engine_abort_marker()) and marker in self.model_info.decode(request.prompt_ids):
            return Result([], "", "abort", len(request.prompt_ids),
                          error=f"simulated engine abort on {marker!r} (SHARDGEN_FAULT)")
        stop_at = next((i for i, t in enumerate(generated) if t in self.stop_ids), None)
        if stop_at is not None:
            output, reason = generated[:stop_at + 1], "stop"
        else:
            output, reason = generated[:request.sampling["max_new_tokens"]], "length"
        captured = {name: values[:len(output)] for name, values in (captured or {}).items()}
        return Result(output, self.model_info.decode(output), reason, len(request.prompt_ids), **captured)

    def kill(self) -> None:
        os.kill(os.getpid(), signal.SIGKILL)  # one process: the engine lives in it

    def close(self) -> None:
        if self._batcher is not None:
            self._batcher.cancel()
