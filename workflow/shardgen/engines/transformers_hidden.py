"""The CPU engine's hidden-state capture (config `capture.hidden_states`, shardgen.capture.HiddenCapture): after a
turn is generated, in the same engine, one prefill pass over its prompt_ids + output_ids with HF's
`output_hidden_states`, one turn at a time (no padding to change the numbers), the chosen layers kept for every
position. A pass over the finished turn, not hooks in `generate`: decode sees one new position per step, and the
prefill gives every position at once in the numbers a trainer's own offline pass computes."""

from shardgen.capture import HiddenCapture


def num_layers(model) -> int:
    """The decoder layers of the model (a multimodal config's text part)."""
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    return config.num_hidden_layers


def turn_states(model, ids: list[int], layer_ids: list[int], device: str):
    """float32 [positions, layers, hidden]: output_hidden_states at `layer_ids` over `ids`."""
    import torch

    with torch.inference_mode():
        out = model(torch.tensor([ids], device=device), use_cache=False, output_hidden_states=True)
    return torch.stack([out.hidden_states[i][0] for i in layer_ids], dim=1).float().cpu()


def attach(model, hidden: HiddenCapture, requests, results, device: str) -> None:
    """Each generated result of a captured request gets its turn's stored states (Result.hidden_states); a failed
    or aborted one none (its turn is generated again, states and all)."""
    layer_ids = hidden.layer_ids(num_layers(model))
    for request, result in zip(requests, results):
        if hidden.wants(request.source) and result.error is None and result.finish_reason != "abort":
            states = turn_states(model, list(request.prompt_ids) + list(result.output_ids), layer_ids, device)
            result.hidden_states = {**hidden.encode(states), "layers": layer_ids}
