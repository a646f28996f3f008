"""CPU engine: batched Hugging Face `generate`, fed asynchronously like the GPU engine so one driver serves both."""

import asyncio
import json
import logging
import os
import signal

from shardgen.config import ConfigError
from shardgen.config_sections import EngineConfig
from shardgen.engines import Request, Result
from shardgen.faults import engine_abort_marker

log = logging.getLogger(__name__)
DEFAULT_BATCH = 8
KNOWN_ARGS = {"dtype": "float32"}  # engine.args this backend understands, with their defaults


def check_args(args: dict) -> dict:
    if unknown := sorted(set(args) - set(KNOWN_ARGS)):
        raise ConfigError(f"engine.args: {unknown} not understood by the transformers backend "
                          f"(it takes {sorted(KNOWN_ARGS)}); SGLang arguments belong in config.yaml, not the demo")
    return {**KNOWN_ARGS, **args}


class TransformersEngine:
    def __init__(self, engine: EngineConfig, model, device: str = "cpu", watchdog=None, seed: int = 0):
        import torch
        from transformers import AutoModelForCausalLM

        self.max_running_requests = engine.max_running_requests or DEFAULT_BATCH
        self.args = {"device": device, **check_args(engine.args)}
        torch.manual_seed(seed)
        self.torch = torch
        self.model_info = model
        self.model = AutoModelForCausalLM.from_pretrained(
            model.path, trust_remote_code=model.trust_remote_code, dtype=getattr(torch, self.args["dtype"])
        ).to(device).eval()
        self.stop_ids = set(model.stop_token_ids)
        self.pad_id = model.tokenizer.pad_token_id if model.tokenizer.pad_token_id is not None else 0
        self._pending: list[tuple[Request, asyncio.Future]] = []
        self._wakeup: asyncio.Event | None = None
        self._batcher: asyncio.Task | None = None
        self.watchdog = watchdog

    def describe(self) -> dict:
        return {"backend": "transformers", "max_running_requests": self.max_running_requests, **self.args}

    def run(self, coro):
        return asyncio.run(coro)

    async def generate(self, request: Request) -> Result:
        if self._batcher is None:
            self._wakeup = asyncio.Event()
            self._batcher = asyncio.create_task(self._run_batches())
        future = asyncio.get_running_loop().create_future()
        self._pending.append((request, future))
        self._wakeup.set()
        return await future

    async def _run_batches(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
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

    def _take_batch(self) -> list:
        # HF generate takes one sampling config per call: batch requests that share one.
        key = json.dumps(self._pending[0][0].sampling, sort_keys=True)
        batch, rest = [], []
        for item in self._pending:
            same = json.dumps(item[0].sampling, sort_keys=True) == key
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
        s = requests[0].sampling
        sample = s["temperature"] > 0
        with torch.inference_mode():
            out = self.model.generate(
                ids, attention_mask=mask, max_new_tokens=s["max_new_tokens"], do_sample=sample,
                temperature=s["temperature"] if sample else None, top_p=s["top_p"] if sample else None,
                top_k=(s["top_k"] if s["top_k"] > 0 else 0) if sample else None,
                eos_token_id=sorted(self.stop_ids), pad_token_id=self.pad_id)
        return [self._result(r, out[i, width:].tolist()) for i, r in enumerate(requests)]

    def _result(self, request: Request, generated: list[int]) -> Result:
        if (marker := engine_abort_marker()) and marker in self.model_info.decode(request.prompt_ids):
            return Result([], "", "abort", len(request.prompt_ids),
                          error=f"simulated engine abort on {marker!r} (SHARDGEN_FAULT)")
        stop_at = next((i for i, t in enumerate(generated) if t in self.stop_ids), None)
        if stop_at is not None:
            output, reason = generated[:stop_at + 1], "stop"
        else:
            output, reason = generated[:request.sampling["max_new_tokens"]], "length"
        return Result(output, self.model_info.decode(output), reason, len(request.prompt_ids))

    def flush_telemetry(self) -> None:
        """Nothing to write: a CPU run has no scheduler telemetry."""

    def kill(self) -> None:
        os.kill(os.getpid(), signal.SIGKILL)  # one process: the engine lives in it

    def close(self) -> None:
        if self._batcher is not None:
            self._batcher.cancel()
