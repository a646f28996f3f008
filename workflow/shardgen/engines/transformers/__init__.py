"""The CPU backend (engine.backend: transformers), found by the registry as this package: `engine`
(TransformersEngine, batched Hugging Face `generate`), `args` (the engine.args it takes, a request's sampling as
generate's arguments), `recorder` (logprob capture as generate runs), `hidden` (hidden-state capture from its
forward pass) and `scoring` (prefill-only scoring for `shardgen audit`). It has no settings of its own (no
`engine.transformers` section). Nothing outside this folder imports inside it but the registry
(engines/registry.py); torch and transformers are imported only when an engine starts."""
