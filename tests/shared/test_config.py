import pytest
import yaml

from shardgen.config import Config, ConfigError
from shardgen.engines.transformers.args import check_args

from conftest import REPO, load_yaml_files

SOURCE = {"name": "m", "path": "x.jsonl", "format": "query_response"}


def test_defaults_are_filled():
    config = Config.from_dict({"model": {"path": "m"}, "sources": [SOURCE]})
    assert config.engine.memory_share == 0.90
    assert config.engine.backend_settings["mamba_strategy"] == "auto"
    assert config.checkpoint.as_dict() == {"every_records": 512, "every_seconds": 60}
    assert config.sources[0].multi_turn == "first"
    assert config.n_shards == 8


def test_unknown_key_is_named_with_a_suggestion():
    with pytest.raises(ConfigError, match=r"unknown key 'defaults.tempreature' "
                                          r"\(did you mean 'defaults.temperature'\?\) in defaults"):
        Config.from_dict({"model": {"path": "m"}, "defaults": {"tempreature": 0.5}, "sources": [SOURCE]})


def test_mistyped_value_names_its_path():
    with pytest.raises(ConfigError, match=r"sources\[0\]\.limit"):
        Config.from_dict({"model": {"path": "m"}, "sources": [{**SOURCE, "limit": "ten"}]})


def test_source_needs_path_or_dataset_and_unique_names():
    with pytest.raises(ConfigError, match=r"sources\[0\]: give exactly one of 'path'"):
        Config.from_dict({"model": {"path": "m"}, "sources": [{"name": "a", "format": "prompt"}]})
    with pytest.raises(ConfigError, match="duplicate name"):
        Config.from_dict({"model": {"path": "m"}, "sources": [SOURCE, SOURCE]})


def test_shards_default_to_one_per_gpu_or_one_on_cpu():
    base = {"model": {"path": "m"}, "sources": [SOURCE]}
    assert Config.from_dict({**base, "gpus": 0}).n_shards == 1
    assert Config.from_dict({**base, "gpus": 8, "engine": {"tp_size": 2}}).n_shards == 4
    assert Config.from_dict({**base, "shards": 32}).n_shards == 32


def test_merged_demo_config_is_valid_and_carries_no_sglang_argument():
    raw = load_yaml_files(REPO / "config" / "config.yaml", REPO / "config" / "demo.yaml")
    config = Config.from_dict(raw)
    assert config.engine.backend == "transformers" and config.gpus == 0
    check_args(config.engine.args)  # raises on any argument the CPU engine does not take
    with pytest.raises(ConfigError, match="attention_backend"):
        check_args({"attention_backend": "fa3"})


def test_production_config_is_valid():
    config = Config.from_dict(yaml.safe_load((REPO / "config" / "config.yaml").read_text()))
    assert config.engine.backend == "sglang" and config.n_shards == 8


def _object_keys(node: dict, cls, where: str = "") -> list[str]:
    """Schema keys without a dataclass field and fields without a schema key, recursively."""
    from dataclasses import fields, is_dataclass
    from typing import get_args, get_type_hints

    from shardgen.engines.registry import BACKENDS

    props, hints = node.get("properties", {}), get_type_hints(cls)
    names = {f.name for f in fields(cls)} - {"raw"}
    if "backend_settings" in names:  # EngineConfig: the chosen backend's section `engine.<name>` is that field
        props = {k: v for k, v in props.items() if k not in BACKENDS} | {"backend_settings": {}}
    problems = [f"{where}{k}: in the schema, no field" for k in sorted(set(props) - names)]
    problems += [f"{where}{k}: a field, not in the schema" for k in sorted(names - set(props))]
    for key in sorted(set(props) & names):
        kind, sub = hints[key], props[key]
        item = get_args(kind)[0] if sub.get("type") == "array" else kind
        if is_dataclass(item):
            problems += _object_keys(sub.get("items", sub), item, f"{where}{key}.")
        elif "properties" in sub:
            problems.append(f"{where}{key}: the schema has sub-keys, the field is not a section")
    return problems


def test_every_schema_key_has_a_field_and_every_field_a_schema_key():
    from shardgen.config.schema import schema

    assert _object_keys(schema(), Config) == []


def test_a_mistyped_key_is_named_with_the_closest_one_from_the_cli(tmp_path, capsys, caplog):
    from shardgen.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"model": {"path": "m"}, "engine": {"inflght": 3}, "sources": [SOURCE]}))
    assert main(["--config", str(bad), "split", "--out", str(tmp_path / "split")]) == 2
    assert "unknown key 'engine.inflght' (did you mean 'engine.inflight'?)" in capsys.readouterr().err + caplog.text


def test_a_mistyped_key_is_named_with_the_closest_one_in_a_workflow_run(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    from conftest import copy_workflow

    work = copy_workflow(tmp_path)
    (work / "config" / "typo.yaml").write_text("engine: {inflght: 3}\n"
                                               "sources: [{name: s, path: x.jsonl, formt: prompt}]\n")
    out = subprocess.run([str(Path(sys.executable).parent / "snakemake"), "--dry-run", "--configfile",
                          "config/demo.yaml", "config/typo.yaml"], cwd=work, capture_output=True, text=True)
    assert out.returncode != 0
    assert "unknown key 'engine.inflght' (did you mean 'engine.inflight'?)" in out.stdout + out.stderr
    assert "unknown key 'sources[0].formt' (did you mean 'sources[0].format'?)" in out.stdout + out.stderr
