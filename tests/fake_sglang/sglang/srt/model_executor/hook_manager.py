"""register_forward_hooks as SGLang 0.5.17 has it (model_executor/hook_manager.py:11-82): each spec's factory, from
'module:factory' or 'module.factory', called with the spec's config; its hook registered with register_forward_hook
on every module whose name matches a pattern by fnmatch (whose `*` crosses dots)."""

import fnmatch
import importlib


def register_forward_hooks(model, hook_specs: list[dict]) -> None:
    name_to_module = dict(model.named_modules())
    for spec in hook_specs:
        patterns, factory_path = spec.get("target_modules", []), spec.get("hook_factory")
        if not patterns or not factory_path:
            continue
        hook = resolve_callable(factory_path)(spec.get("config") or {})
        for name, module in name_to_module.items():
            if any(fnmatch.fnmatch(name, pattern) for pattern in patterns):
                module.register_forward_hook(hook)


def resolve_callable(path: str):
    module_name, fn_name = path.split(":", 1) if ":" in path else path.rsplit(".", 1)
    return getattr(importlib.import_module(module_name), fn_name)
