"""A test-only stand-in for the `sglang` package: no GPU, no model. It reproduces what shardgen's adapter must
cope with: the ServerArgs fields of 0.5.13.post1, 0.5.17 or 0.5.23 (FAKE_SGLANG_VERSION), unknown kwargs refused,
get_server_info() unusable inside a running loop, duplicate rids refused, dict finish_reason, one event loop
bound at first use, scheduler log lines written to stderr by a subprocess (retraction warnings among them, in
SGLang 0.5.17's words), tp_size x dp_size GPUs needed among CUDA_VISIBLE_DEVICES (each data-parallel rank running its
own max_running_requests), a prefix cache that reports each request's `cached_tokens`, and forward hooks
(ServerArgs.forward_hooks) run on a small model with NemotronH's module names (fake_model.py): each request's
prefill in chunks of FAKE_SGLANG_CHUNK tokens (default 8) beside another request's row, then one eager decode step."""

import asyncio
import collections
import os
import subprocess
import sys
import time

from sglang.srt.server_args import ServerArgs, VERSION

__version__ = VERSION
ABORT_TOKEN = 666  # a prompt containing this id is aborted by the "scheduler"
ENGINES: list = []  # for kill_process_tree
# One prefill line of 120 tokens: below half of what a single 0.1 s decode interval reports (123 tokens), so however
# few decode lines a loaded machine lets through, the run never reads as prefill-heavy.
SCHEDULER = r"""
import sys, time
from datetime import datetime
cap = int(sys.argv[1])
def log(msg):
    sys.stderr.write(f"[{datetime.utcnow():%Y-%m-%d %H:%M:%S.%f}"[:-3] + f"] {msg}\n"); sys.stderr.flush()
log(f"Mamba Cache is allocated. max_mamba_cache_size: {3 * cap}, conv_state size: 0.50GB, ssm_state size: 9.50GB ")
log("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 100000, K size: 1.00 GB, V size: 1.00 GB")
log(f"max_total_num_tokens=100000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests={cap}, "
    "context_len=8192, available_gpu_mem=18.93 GB")
log(f"Prefill batch, #new-seq: {cap}, #new-token: 120, #cached-token: 0, full token usage: 0.01, mamba usage: 0.50, "
    "#running-req: 0, #queue-req: 7, #pending-token: 0, cuda graph: False, input throughput (token/s): 9000.00")
throughput = sys.argv[2]
for i in range(int(sys.argv[3])):  # scheduler.py's words when a decode step finds the KV pool full
    log(f"KV cache pool is full. Retract requests. #retracted_reqs: {i + 1}, #new_tokens_gained: {700 * (i + 1)}, "
        f"#mamba_num_gained: {3 * (i + 1)}, #new_token_ratio: 0.7000 -> {0.7 + 0.05 * (i + 1):.4f}")
print("ready", flush=True)  # the lines above are written before the engine takes a request, however slow the machine
while True:
    log(f"Decode batch, #running-req: {cap}, #full token: 5000, full token usage: 0.05, mamba num: {2 * cap}, "
        f"mamba usage: 0.66, cuda graph: True, gen throughput (token/s): {throughput}, #queue-req: 3")
    time.sleep(0.1)
"""


class Engine:
    def __init__(self, **kwargs):
        self.server_args = ServerArgs(**kwargs)  # TypeError on an unknown field, as the real dataclass
        if (getattr(self.server_args, "mamba_radix_cache_strategy", None) == "no_buffer"
                and not self.server_args.disable_radix_cache and not self.server_args.disable_overlap_schedule):
            raise AssertionError("no_buffer do not support overlap schedule. Try to set disable_overlap_schedule=True.")
        self.cap = self.server_args.max_running_requests or 16  # per data-parallel rank
        visible = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
        needed = self.server_args.tp_size * self.server_args.dp_size
        if visible and len(visible) < needed:
            raise RuntimeError(f"tp_size x dp_size = {needed} GPUs needed, CUDA_VISIBLE_DEVICES has {len(visible)}")
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        # Failure modes, by environment: die (SIGKILL of the tree), out of memory (logged, then the tree kill),
        # stall (requests never return, decode lines report zero throughput), slow requests (positive throughput),
        # out of memory at start-up above a cap, and a decode throughput that depends on the settings.
        self.die_after = int(os.environ.get("FAKE_SGLANG_DIE_AFTER", "0"))
        self.oom_after = int(os.environ.get("FAKE_SGLANG_OOM_AFTER", "0"))
        self.stall_after = int(os.environ.get("FAKE_SGLANG_STALL_AFTER", "0"))
        self.latency = float(os.environ.get("FAKE_SGLANG_LATENCY", "0"))
        self.abort_every = int(os.environ.get("FAKE_SGLANG_ABORT_EVERY", "0"))
        if os.environ.get("FAKE_SGLANG_START_OOM_ABOVE") and self.cap > int(os.environ["FAKE_SGLANG_START_OOM_ABOVE"]):
            sys.stderr.write("torch.OutOfMemoryError: CUDA out of memory while allocating the mamba pool\n")
            sys.stderr.flush()
            time.sleep(0.3)  # SGLang's tree kill follows the scheduler's traceback
            from sglang.srt.utils import kill_process_tree
            kill_process_tree(os.getpid(), include_parent=True)
        throughput = "0.00" if self.stall_after else "1234.50"
        if os.environ.get("FAKE_SGLANG_TPS_BY_SETTING"):  # for `shardgen tune`: the prefix cache off pays 3x,
            # a bfloat16 SSM state 1.5x more (half the state's bytes per step)
            bf16 = 1.5 if self.server_args.mamba_ssm_dtype == "bfloat16" else 1
            throughput = f"{10.0 * self.cap * (3 if self.server_args.disable_radix_cache else 1) * bf16:.2f}"
        # FAKE_SGLANG_RETRACTIONS=n: n retraction lines, the i-th (from 1) taking back i requests and 700 i tokens
        retractions = os.environ.get("FAKE_SGLANG_RETRACTIONS", "0")
        self.scheduler = subprocess.Popen([sys.executable, "-c", SCHEDULER, str(self.cap), throughput, retractions],
                                          stdout=subprocess.PIPE, text=True)
        self.scheduler.stdout.readline()  # as SGLang's Engine, wait for the scheduler to be up
        # The prefix cache (unless disable_radix_cache): each finished request's prompt + output, the most recent
        # FAKE_SGLANG_CACHE_KEEPS of them (unset: all; 0: each evicted before any reuse). A request's cached_tokens
        # is its longest common prefix with one kept, short of its last token (SGLang always computes that one).
        keeps = os.environ.get("FAKE_SGLANG_CACHE_KEEPS")
        self.cache = collections.deque(maxlen=int(keeps) if keeps else None)
        ENGINES.append(self)
        self.seen_rids: set[str] = set()
        self.logprob_args: list[dict] = []  # each request's logprob arguments, as the adapter passed them
        self.bound_loop = None
        self.model = self._hooked_model() if getattr(self.server_args, "forward_hooks", None) else None

    def _hooked_model(self):
        import json
        from pathlib import Path

        from sglang import fake_model
        from sglang.srt.model_executor.hook_manager import register_forward_hooks

        config_path = Path(self.server_args.model_path) / "config.json"
        config = json.loads(config_path.read_text()) if config_path.exists() else {}
        model = fake_model.ForCausalLM(config.get("num_hidden_layers", 4), config.get("hidden_size", 8))
        register_forward_hooks(model, self.server_args.forward_hooks)  # after graph capture, as SGLang does
        return model

    def _forward(self, rid: str, ids: list[int], prefix: int) -> None:
        """The model's passes over a request: its prefill from `prefix` on, chunk by chunk, each beside another
        request's row, then an eager decode step (SGLang's decode under a CUDA graph runs no hook at all)."""
        from sglang import fake_model

        chunk = int(os.environ.get("FAKE_SGLANG_CHUNK", "8"))
        for start in range(prefix, len(ids), chunk):
            fake_model.run(self.model, [("fake-other", [5, 6, 7], 0), (rid, ids[:start + chunk], start)], True)
        fake_model.run(self.model, [("fake-other", [5, 6, 7], 0), (rid, ids, 0)], False)

    def get_server_info(self) -> dict:
        # the real one runs loop.run_until_complete: impossible while the loop runs
        self.loop.run_until_complete(asyncio.sleep(0))
        return {**vars(self.server_args), "version": VERSION,
                "internal_states": [{"effective_max_running_requests_per_dp": self.cap, "last_gen_throughput": 0.0}]}

    async def async_generate(self, prompt=None, sampling_params=None, input_ids=None, rid=None, return_logprob=False,
                             top_logprobs_num=None, logprob_start_len=None, **_):
        loop = asyncio.get_running_loop()
        if self.bound_loop is None:
            self.bound_loop = loop
        elif loop is not self.bound_loop:
            raise RuntimeError("the tokenizer manager is bound to a different event loop")
        if rid in self.seen_rids:
            raise ValueError(f"Duplicate request ID {rid}")
        self.seen_rids.add(rid)
        self.logprob_args.append({"return_logprob": return_logprob, "top_logprobs_num": top_logprobs_num,
                                  "logprob_start_len": logprob_start_len})
        n_seen = len(self.seen_rids)
        if self.oom_after and n_seen > self.oom_after:
            sys.stderr.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
            sys.stderr.flush()
            await asyncio.sleep(0.3)  # SGLang's tree kill follows the scheduler's traceback
            from sglang.srt.utils import kill_process_tree
            kill_process_tree(os.getpid(), include_parent=True)
        if self.die_after and n_seen > self.die_after:
            from sglang.srt.utils import kill_process_tree
            kill_process_tree(os.getpid(), include_parent=True)
        if self.stall_after and n_seen > self.stall_after:
            await asyncio.Event().wait()  # never returns
        await asyncio.sleep(self.latency or 0.002 * (len(input_ids) % 7))
        n = sampling_params["max_new_tokens"]
        meta = {"id": rid, "prompt_tokens": len(input_ids), "cached_tokens": self._cached(input_ids)}
        if ABORT_TOKEN in input_ids or (self.abort_every and n_seen % self.abort_every == 0):
            meta.update(completion_tokens=0, finish_reason={"type": "abort", "message": "fake scheduler aborted it",
                                                            "status_code": 500})
            return {"text": "", "output_ids": [], "meta_info": meta}
        if self.model is not None:  # the cached prefix is not run; asked logprobs start where it may end
            prefix = meta["cached_tokens"]  # (SGLang 0.5.17 schedule_batch.py:1368-1372)
            if return_logprob and logprob_start_len is not None and logprob_start_len >= 0:
                prefix = min(prefix, logprob_start_len)
            self._forward(rid, list(input_ids), prefix)
        stops = sampling_params.get("stop_token_ids") or []
        if stops and not sampling_params.get("ignore_eos") and len(input_ids) % 2:
            # stops early, without the stop id: the adapter adds it
            output = [(t * 7) % 50 + 100 for t in range(n // 2)]
            meta.update(completion_tokens=len(output) + 1, finish_reason={"type": "stop", "matched": stops[-1]})
        else:
            output = [(t * 7) % 50 + 100 for t in range(n)]
            meta.update(completion_tokens=n, finish_reason={"type": "length", "length": n})
        if not self.server_args.disable_radix_cache:
            self.cache.append(list(input_ids) + output)
        if return_logprob:  # one entry per generated token, the matched stop token included; no token texts
            chosen = [*output, *([stops[-1]] if meta["finish_reason"]["type"] == "stop" else [])]
            lps = [-0.25 * (i % 4) - 0.05 for i in range(len(chosen))]
            meta["output_token_logprobs"] = [(lp, t, None) for lp, t in zip(lps, chosen)]
            meta["output_top_logprobs"] = [  # the chosen token first (greedy), then others less likely
                [(lp, t, None), *((lp - 1.0 - j, 1000 + j, None) for j in range((top_logprobs_num or 0) - 1))]
                if top_logprobs_num else None for lp, t in zip(lps, chosen)]
        return {"text": " ".join(map(str, output)), "output_ids": output, "meta_info": meta}

    def _cached(self, input_ids: list[int]) -> int:
        if self.server_args.disable_radix_cache or not input_ids:
            return 0
        return min(len(input_ids) - 1, max((len(os.path.commonprefix([input_ids, kept])) for kept in self.cache),
                                           default=0))

    def generate(self, input_ids=None, sampling_params=None, **_):
        """Engine.generate(list): every item at once, results in input order."""
        params = sampling_params if isinstance(sampling_params, list) else [sampling_params] * len(input_ids)

        async def run_all():  # one sampling dict for all, or one per prompt, as SGLang takes them
            return await asyncio.gather(*(self.async_generate(input_ids=ids, sampling_params=p,
                                                              rid=f"list-{len(self.seen_rids)}-{i}")
                                          for i, (ids, p) in enumerate(zip(input_ids, params))))
        return self.loop.run_until_complete(run_all())

    def shutdown(self) -> None:
        self.scheduler.kill()
        self.scheduler.wait()

