"""A sampling field added in one place, its declaration (shardgen.sampling.FIELDS), reaches the config, the prompts
rows, the CPU engine, the part rows, the dataset and the provenance, and a backend that cannot apply it refuses it
at config time. The run is a fresh interpreter that adds the field before importing the rest, as a new line in
FIELDS would: the sections, the request and the tables are built from FIELDS as their modules are imported."""

import json
import subprocess
import sys

import yaml

from conftest import REPO

TESTS = REPO / "tests"
RUN = """
import json, sys
from shardgen import sampling

sampling.FIELDS = (*sampling.FIELDS, sampling.SamplingField(
    "typical_p", "number", 1.0, {"exclusiveMinimum": 0, "maximum": 1}, "as `temperature`; without a generation "
    "config 1.0", "typical_p", greedy_ignores=True))
sys.path.insert(0, sys.argv[2])
import pyarrow.parquet as pq
from helpers import part_rows, run_merge, stage
from shardgen.config import Config, ConfigError
from shardgen.engines.transformers import engine as cpu_engine
from shardgen.merge.provenance import provenance

raw = json.loads(open(sys.argv[1]).read())
try:
    Config.from_dict({**raw, "engine": {**raw["engine"], "backend": "sglang"}})
    refused = None
except ConfigError as err:
    refused = str(err)
sent, hf_sampling = [], cpu_engine.hf_sampling

def recording(request_sampling):
    sent.append(hf_sampling(request_sampling))
    return sent[-1]

cpu_engine.hf_sampling = recording  # what HF generate is called with, per batch
config = Config.from_dict(raw)
layout = stage(config, 1)
print(json.dumps({
    "refused": refused, "sent": sorted({s["typical_p"] for s in sent}),
    "prompts": sorted((r["source"], r["typical_p"], json.loads(r["sampling_origin"])["typical_p"])
                      for r in pq.read_table(layout.prompts).to_pylist()),
    "parts": sorted(r["typical_p"] for r in part_rows(layout)),
    "dataset": sorted((r["source"], r["typical_p"]) for r in run_merge(layout).to_pylist()),
    "provenance": {name: [(s["typical_p"], s["origin"]["typical_p"]) for s in rows]
                   for name, rows in provenance(config, layout)["sampling_per_source"].items()},
    "key_settings": [sorted(config.gen_settings(s, sampling.served(config.model.path))) for s in config.sources]}))
"""


def test_a_field_declared_once_reaches_the_dataset_and_is_refused_by_a_backend_that_cannot_apply_it(
        tmp_path, demo_model, write_jsonl):
    raw = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    questions = [{"query": f"What is {i} + {i}?"} for i in range(3)]
    birds = [{"query": f"Name {i} birds."} for i in range(2)]
    raw.update(results_dir=str(tmp_path / "results"), prompts={"workers": 1}, defaults={"max_new_tokens": 4},
               model={**raw["model"], "path": str(demo_model)}, sources=[
                   {"name": "set", "path": write_jsonl("set.jsonl", questions), "format": "query_response",
                    "sampling": {"typical_p": 0.9}},
                   {"name": "unset", "path": write_jsonl("unset.jsonl", birds), "format": "query_response"}])
    (tmp_path / "config.json").write_text(json.dumps(raw))
    proc = subprocess.run([sys.executable, "-c", RUN, str(tmp_path / "config.json"), str(TESTS)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "sources[0].sampling: typical_p 0.9 cannot be applied by the sglang backend" in seen["refused"]
    assert seen["sent"] == [0.9, 1.0]  # HF generate's typical_p, for each batch (a batch shares its sampling)
    assert seen["prompts"] == [["set", 0.9, "source"]] * 3 + [["unset", 1.0, "neutral"]] * 2
    assert seen["parts"] == [0.9] * 3 + [1.0] * 2
    assert seen["dataset"] == [["set", 0.9]] * 3 + [["unset", 1.0]] * 2
    assert seen["provenance"] == {"set": [[0.9, "source"]], "unset": [[1.0, "neutral"]]}
    # a field added later enters the gen_key only away from its neutral value: the unset source's keys are unchanged
    assert ["typical_p" in settings for settings in seen["key_settings"]] == [True, False]
