"""Hidden-state capture on SGLang (config `capture.hidden_states`) without patching SGLang: after a captured turn is
generated, one prefill pass over its prompt_ids + output_ids in the same engine, whose forward hooks (ServerArgs
`forward_hooks`, SGLang 0.5.17's model_executor/hook_manager.py) copy the chosen layers for that request's extend
positions and hand them to this process through a file per request and chunk. docs/engine.md "Hidden states on
SGLang" gives the facts of SGLang's source this rests on, with file:line.

Two halves: `hook` and its closures run inside SGLang's scheduler process (imported there by SGLang from
HOOK_FACTORY); HiddenPass runs in the engine's own process."""

import os
import shutil
from pathlib import Path

from shardgen.capture import LAST_BEFORE_NORM, HiddenCapture
from shardgen.engines.sglang_results import result_of
from shardgen.engines.sglang_versions import spelling

HOOK_FACTORY = "shardgen.engines.sglang_hidden:hook"
PASS_PREFIX = "hidden-"  # a capture pass's rid: this prefix and its turn's rid; the hooks keep no other request's rows
PASS_FOLDER = "hidden-pass"  # under the engine's workdir: the hooks' files, each read back and removed at once
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
    """Each capture pass's rows of an extend batch, [positions, layers, hidden] on the host, as
    `<rid>.<first position>.safetensors`: a chunked prefill writes one file per chunk. A layer whose hook did not
    run leaves the request without its file: the engine's side refuses the turn (collect)."""
    import torch
    from safetensors.torch import save_file

    if not forward_batch.forward_mode.is_extend() or any(key not in _stash for key in layer_ids):
        return
    offset = 0
    for rid, start, n in zip(forward_batch.rids, forward_batch.extend_prefix_lens_cpu,
                             forward_batch.extend_seq_lens_cpu):
        if rid.startswith(PASS_PREFIX):
            rows = torch.stack([_stash[key][offset:offset + n] for key in layer_ids], dim=1).to("cpu")
            target = folder / f"{rid}.{int(start)}.safetensors"
            save_file({"states": rows.contiguous()}, str(target) + ".tmp")
            os.replace(str(target) + ".tmp", target)
        offset += n


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

    def __init__(self, hidden: HiddenCapture, model_config: dict, workdir: Path, engine_args: dict):
        if int(engine_args.get("tp_size") or 1) > 1 or int(engine_args.get("pp_size") or 1) > 1 \
                or engine_args.get("enable_dp_attention"):
            # tensor parallelism fuses the norms with the all-reduce (norm.forward_with_allreduce_fusion, no hook)
            # and runs every hook on each rank; DP attention reaches the layers through another path
            raise ValueError("capture.hidden_states on SGLang: one GPU per engine only (tp_size 1, pp_size 1, no "
                             "enable_dp_attention)")
        self.hidden, self.num_layers = hidden, int(model_config["num_hidden_layers"])
        self.layer_ids = hidden.layer_ids(self.num_layers)
        self.folder = workdir / PASS_FOLDER
        shutil.rmtree(self.folder, ignore_errors=True)  # one engine owns the workdir: a killed pass's files go
        self.folder.mkdir(parents=True)
        architecture = (model_config.get("architectures") or ["(none)"])[0]
        self.forward_hooks = hook_specs(architecture, self.layer_ids, self.num_layers, self.folder)
        self.header = hidden.header(self.num_layers)

    async def attach(self, engine, request, result) -> None:
        """A generated result of a captured request gets its turn's stored states (Result.hidden_states); a failed
        or aborted one none (its turn is generated again, states and all)."""
        if not self.hidden.wants(request.source) or result.error is not None or result.finish_reason == "abort":
            return
        ids = list(request.prompt_ids) + list(result.output_ids)
        rid = PASS_PREFIX + request.rid
        # Input logprobs from position 0: SGLang then matches no cached prefix (schedule_batch.py:1368-1372), so
        # every position runs through the hooked modules; the one token generated is thrown away.
        out = await engine.async_generate(input_ids=ids, sampling_params={"max_new_tokens": 1}, rid=rid,
                                          return_logprob=True, logprob_start_len=0, top_logprobs_num=0)
        if (failed := result_of(out)).error is not None or failed.finish_reason == "abort":
            raise RuntimeError(f"{request.rid}: SGLang aborted the hidden-state pass over its turn ({failed.error})")
        result.hidden_states = {**self.hidden.encode(self.collect(rid, len(ids))), "header": self.header}

    def collect(self, rid: str, n: int):
        """The pass's files of `rid`, joined by position and removed; every position 0..n-1 must be there."""
        import torch
        from safetensors.torch import load_file

        chunks = sorted((p for p in self.folder.glob(f"{rid}.*.safetensors") if p.name.rsplit(".", 2)[0] == rid),
                        key=lambda p: int(p.name.split(".")[-2]))
        states, seen = None, torch.zeros(n, dtype=torch.bool)
        for path in chunks:
            start, rows = int(path.name.split(".")[-2]), load_file(str(path))["states"]
            if states is None:
                states = torch.empty((n, *rows.shape[1:]), dtype=rows.dtype)
            states[start:start + len(rows)], seen[start:start + len(rows)] = rows[:n - start], True
            path.unlink()
        if states is None or not bool(seen.all()):
            missing = n if states is None else int((~seen).sum())
            raise RuntimeError(f"{rid}: SGLang's forward hooks gave {missing} of the turn's {n} positions no hidden "
                               "states (a prefill under a CUDA graph, or a module path this adapter does not know)")
        return states
