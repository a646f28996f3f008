"""The CPU engine's hidden-state capture (config `capture.hidden_states`, shardgen.capture.HiddenCapture): after a
turn is generated, in the same engine, one prefill pass over its prompt_ids + output_ids with HF's
`output_hidden_states`, one turn at a time (no padding to change the numbers), the chosen layers kept for every
position. A pass over the finished turn, not hooks in `generate`: decode sees one new position per step, and the
prefill gives every position at once in the numbers a trainer's own offline pass computes."""

import time

from shardgen.capture import LAST_BEFORE_NORM, HiddenCapture

FINAL_NORM_NAMES = ("norm", "norm_f", "final_layernorm", "ln_f")  # Llama/Qwen, NemotronH/Mamba, Phi/GPT-NeoX, GPT-2


def num_layers(model) -> int:
    """The decoder layers of the model (a multimodal config's text part)."""
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    return config.num_hidden_layers


def final_norm(model):
    """The decoder's final norm, whose input is LAST_BEFORE_NORM; a model without a known one is refused."""
    decoder = model.get_decoder()
    for name in FINAL_NORM_NAMES:
        if (norm := getattr(decoder, name, None)) is not None:
            return norm
    raise ValueError(f"capture.hidden_states: {LAST_BEFORE_NORM} needs the final norm of "
                     f"{type(decoder).__name__}, which has none of {list(FINAL_NORM_NAMES)}")


def turn_states(model, ids: list[int], layer_ids: list, device: str):
    """float32 [positions, layers, hidden]: output_hidden_states at `layer_ids` over `ids`, and the final norm's
    input (a hook on that norm) at LAST_BEFORE_NORM."""
    import torch

    before_norm = []
    hook = final_norm(model).register_forward_pre_hook(lambda _, args: before_norm.append(args[0])) \
        if LAST_BEFORE_NORM in layer_ids else None
    try:
        with torch.inference_mode():
            # the logits of the last position only: the states are what is kept, not the vocabulary's scores
            out = model(torch.tensor([ids], device=device), use_cache=False, output_hidden_states=True,
                        logits_to_keep=1)
    finally:
        if hook is not None:
            hook.remove()
    return torch.stack([(before_norm[-1] if i == LAST_BEFORE_NORM else out.hidden_states[i])[0] for i in layer_ids],
                       dim=1).float().cpu()


def attach(model, hidden: HiddenCapture, requests, results, device: str, timing: dict) -> None:
    """Each generated result of a captured request gets its turn's stored states (Result.hidden_states); a failed
    or aborted one none (its turn is generated again, states and all). `timing` (the done record's
    engine.hidden_pass, as the SGLang pass keeps it) adds up the turns, positions and the passes' time."""
    header = hidden.header(num_layers(model))
    layer_ids = header["layers"]
    for request, result in zip(requests, results):
        if hidden.wants(request.source) and result.error is None and result.finish_reason != "abort":
            started = time.perf_counter()
            ids = list(request.prompt_ids) + list(result.output_ids)
            result.hidden_states = {**hidden.encode(turn_states(model, ids, layer_ids, device)), "header": header}
            timing["turns"] += 1
            timing["positions"] += len(ids)
            timing["pass_s"] = round(timing["pass_s"] + time.perf_counter() - started, 3)
