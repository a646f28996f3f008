"""One setting of `shardgen audit`: a fresh engine under the setting's config scores the sample prefill-only.

`run_setting` runs `python -m shardgen.audit.score AUDIT_DIR INDEX`, one process per setting, as `shardgen tune`
measures: SGLang takes its whole process tree down when it fails, frees the GPU only at exit, and the audit must
outlive that and go on with the next setting."""

import json
import logging
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from shardgen.store import tables
from shardgen.store.atomic import committed, write_text
from shardgen.config import Config
from shardgen.engines.registry import numerics_of
from shardgen.engines.scoring import ScoreRequest
from shardgen.engines.session import open_engine
from shardgen.generate import gpu_lease
from shardgen.layout import AuditLayout

log = logging.getLogger(__name__)


def score(audit_dir: Path, index: int) -> None:
    """Score the sample under setting `index` of the plan: its scores and its engine's numerics."""
    audit = AuditLayout(audit_dir)
    plan = json.loads(audit.plan.read_text())
    config = Config.from_dict(plan["settings"][index]["config"])
    gpu = gpu_lease.lease_for(config)  # before SGLang (and torch) is imported
    turns = pq.read_table(audit.sample).to_pylist()
    requests = [ScoreRequest(f"audit-{index}-{t['gen_key']}", t["prompt_ids"], t["output_ids"],
                             {"temperature": t["temperature"]}) for t in turns]
    work = [{"prompt_ids": r.context_ids + r.target_ids, "max_new_tokens": 1} for r in requests]
    with open_engine(config, config.target_model, audit.setting_dir(index), device="cpu" if gpu == "cpu" else "cuda",
                     work=work) as engine:
        scores = engine.score(requests, plan["top_k"])
        record = engine.info.record
    rows = [{"gen_key": t["gen_key"], **asdict(s)} for t, s in zip(turns, scores)]
    with committed(audit.scores(index)) as tmp:
        pq.write_table(pa.Table.from_pylist(rows, schema=tables.AUDIT_SCORES), tmp)
    numerics = {**numerics_of(record, Path(config.model.path)), "device": gpu}
    write_text(json.dumps(numerics, indent=1, default=str), audit.engine(index))


def run_setting(audit_dir: Path, index: int) -> dict:
    """Score one setting in a child process: its engine's numerics, or, when the child died (SGLang's tree kill,
    out of memory, an alignment error), `failed` with its log's last lines."""
    audit = AuditLayout(audit_dir)
    if audit.setting_dir(index).exists():  # an earlier call's scores are not this sample's
        shutil.rmtree(audit.setting_dir(index))
    audit.setting_dir(index).mkdir(parents=True)
    with open(audit.engine_log(index), "w") as out:
        proc = subprocess.run([sys.executable, "-m", "shardgen.audit.score", str(audit_dir), str(index)],
                              stdout=out, stderr=subprocess.STDOUT)
    if proc.returncode == 0 and audit.scores(index).exists():
        return {"status": "ok", "engine": json.loads(audit.engine(index).read_text())}
    tail = audit.engine_log(index).read_text(errors="replace").splitlines()[-15:]
    log.error("audit: setting %d failed (rc %s); last log lines:\n%s", index, proc.returncode, "\n".join(tail))
    return {"status": "failed", "returncode": proc.returncode, "log_tail": tail}


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    score(Path(sys.argv[1]), int(sys.argv[2]))
