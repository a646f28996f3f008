"""The scheduler process's half of hidden-state capture on SGLang (engines/sglang/hidden.py is the engine's):
the hook specs SGLang registers (ServerArgs `forward_hooks`), the hooks it imports by HOOK_FACTORY and calls on
each forward, and the hand-off of a capture pass's rows to the engine's process.

The scheduler's loop waits for neither the copy to the host nor the writing: the batch hook starts an asynchronous
copy into pinned host memory on the forward's stream and one writer thread saves it once the copy is done (the
layout of vLLM PR #37374's KV offload), as `<rid>.<first position>-<end>.safetensors`."""

import json
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from shardgen.capture import LAST_BEFORE_NORM

HOOK_FACTORY = f"{__name__}:hook"  # SGLang imports the factory by this dotted path in its scheduler
PASS_PREFIX = "hidden-"  # a capture pass's rid: this prefix and its turn's rid; the hooks keep no other request's rows
HOOK_STATS = "hook-stats.json"  # the scheduler side's counters, rewritten at most every STATS_EVERY_S
STATS_EVERY_S = 2.0
log = logging.getLogger(__name__)
# Where a model's layer ids are seen through modules SGLang calls as modules (forward hooks fire on __call__ only):
# the embeddings' output (id 0), each decoder layer's input norm, whose fused add returns (normed, hidden + residual)
# with the second the layer's input (id i), the final norm's (normed: id L; its residual sum: LAST_BEFORE_NORM), and
# the logits processor, the one module called with the ForwardBatch (which request each row belongs to).
MODULES = {"NemotronHForCausalLM": {"embeddings": "model.embed_tokens", "layer_norm": "model.layers.{}.norm",
                                    "final_norm": "model.norm_f", "batch": "logits_processor"}}

_stash: dict = {}  # scheduler process: this forward's copies, by layer id, on the device until the batch hook


def hook(config: dict):
    """SGLang's hook factory: `config` is a spec's own (hook_specs). Each hook clones at once: the next layer's
    fused norm adds into the residual tensor in place."""
    role, keys = config["role"], config.get("keys") or []

    def embeddings(module, inputs, output):
        _stash.clear()  # the first module of every forward
        if 0 in keys:
            _stash[0] = output.detach().clone()

    def layer_input(module, inputs, output):
        _stash[keys[0]] = output[1].detach().clone()

    def final_norm(module, inputs, output):
        normed, before_norm = output
        for key in keys:
            _stash[key] = (before_norm if key == LAST_BEFORE_NORM else normed).detach().clone()

    def batch(module, inputs, output):
        try:
            write_rows(inputs[3], Path(config["folder"]), config["layer_ids"])
        finally:
            _stash.clear()

    return {"embeddings": embeddings, "layer_input": layer_input, "final_norm": final_norm, "batch": batch}[role]


def write_rows(forward_batch, folder: Path, layer_ids: list) -> None:
    """Each capture pass's rows of an extend batch, [positions, layers, hidden], handed to the writer as
    `<rid>.<first position>-<end>.safetensors`: a chunked prefill gives one file per chunk. A layer whose hook did
    not run leaves the request without its file: the engine's side refuses the turn (collect)."""
    import torch

    if not forward_batch.forward_mode.is_extend() or any(key not in _stash for key in layer_ids):
        return
    started, offset = time.perf_counter(), 0
    handoff = Handoff.of(folder)
    for rid, start, n in zip(forward_batch.rids, forward_batch.extend_prefix_lens_cpu,
                             forward_batch.extend_seq_lens_cpu):
        if rid.startswith(PASS_PREFIX):
            handoff.send(f"{rid}.{int(start)}-{int(start) + int(n)}",
                         torch.stack([_stash[key][offset:offset + n] for key in layer_ids], dim=1))
        offset += n
    handoff.count("scheduler_s", time.perf_counter() - started)


class Handoff:
    """The scheduler process's side of the hand-off, one per folder: device rows copied asynchronously into pinned
    host memory, saved by one thread once their copy is done, each file renamed into place whole."""
    _by_folder: dict[Path, "Handoff"] = {}

    def __init__(self, folder: Path):
        self.folder, self.lock = folder, threading.Lock()
        self.writer = ThreadPoolExecutor(1, thread_name_prefix="shardgen-hidden")
        self.stats = {"chunks": 0, "positions": 0, "bytes": 0, "scheduler_s": 0.0, "write_s": 0.0, "errors": 0}
        self.saved_at = 0.0

    @classmethod
    def of(cls, folder: Path) -> "Handoff":
        if folder not in cls._by_folder:
            cls._by_folder[folder] = cls(folder)
        return cls._by_folder[folder]

    def send(self, name: str, rows) -> None:
        import torch

        if rows.is_cuda:
            # the copy runs on the forward's stream: a later kernel that reuses `rows`' memory runs after it
            host = torch.empty(rows.shape, dtype=rows.dtype, pin_memory=True)
            host.copy_(rows, non_blocking=True)
            copied = torch.cuda.Event()
            copied.record()
        else:
            host, copied = rows.clone(), None
        self.writer.submit(self._write, name, host, copied)

    def _write(self, name: str, host, copied) -> None:
        from safetensors.torch import save_file

        started = time.perf_counter()
        try:
            if copied is not None:
                copied.synchronize()
            target = self.folder / f"{name}.safetensors"
            save_file({"states": host.contiguous()}, str(target) + ".tmp")
            os.replace(str(target) + ".tmp", target)
            self.count("positions", len(host), "bytes", host.nbytes, "chunks", 1)
        except Exception:  # the engine's side names the turn whose positions never came
            log.exception("hidden-state hand-off: %s not written", name)
            self.count("errors", 1)
        self.count("write_s", time.perf_counter() - started)

    def count(self, *pairs) -> None:
        with self.lock:
            for key, value in zip(pairs[::2], pairs[1::2]):
                self.stats[key] += value
            if time.monotonic() - self.saved_at >= STATS_EVERY_S or pairs[0] == "write_s":
                self.saved_at = time.monotonic()
                (self.folder / (HOOK_STATS + ".tmp")).write_text(json.dumps(self.stats))
                os.replace(self.folder / (HOOK_STATS + ".tmp"), self.folder / HOOK_STATS)


def hook_specs(architecture: str, layer_ids: list, num_layers: int, folder: Path) -> list[dict]:
    """ServerArgs.forward_hooks for `layer_ids` (capture.HiddenCapture.layer_ids) on a model of `num_layers`
    decoder layers. Exact module names, no wildcards: fnmatch's `*` crosses dots (model.layers.*.norm would also
    match each Mamba mixer's own norm)."""
    if architecture not in MODULES:
        raise ValueError(f"capture.hidden_states on SGLang: {architecture} is not among the architectures whose "
                         f"module layout is read ({sorted(MODULES)}); use engine.backend transformers")
    names = MODULES[architecture]

    def spec(role: str, modules: list[str], **config) -> dict:
        return {"name": f"shardgen-hidden-{role}", "target_modules": modules, "hook_factory": HOOK_FACTORY,
                "config": {"role": role, **config}}

    specs = [spec("embeddings", [names["embeddings"]], keys=[0] if 0 in layer_ids else [])]
    specs += [spec("layer_input", [names["layer_norm"].format(i)], keys=[i])
              for i in layer_ids if i != LAST_BEFORE_NORM and 0 < i < num_layers]
    if final := [i for i in layer_ids if i in (num_layers, LAST_BEFORE_NORM)]:
        specs.append(spec("final_norm", [names["final_norm"]], keys=final))
    return specs + [spec("batch", [names["batch"]], folder=str(folder), layer_ids=list(layer_ids))]
