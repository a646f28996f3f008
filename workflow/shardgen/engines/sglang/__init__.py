"""The SGLang backend (engine.backend: sglang), found by the registry as this package: `engine` (SGLangEngine, the
in-process sglang.Engine), `settings` (the `engine.sglang` section, light: validation imports it), `args` and
`versions` (shardgen's settings as the installed SGLang's ServerArgs fields), `running_cap` and `mamba_auto` (what
`auto` resolves to before the start), `log_lines` (its log, read), `record` (its done record, read back without an
engine), `results` and `scoring` (its outputs as Results and Scores), `hidden` (hidden-state capture through its
forward hooks), `advice` (its answers to `shardgen diagnose`) and `tune` (the settings `shardgen tune` measures).
Nothing outside this folder imports inside it but the registry (engines/registry.py); sglang and torch are
imported only when an engine starts."""
