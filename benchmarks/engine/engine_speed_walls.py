"""Per results folder of a one-shard workflow run: generation wall (first submit to last completion), output tok/s,
and where the time before the first request went (attempt start -> engine up -> first submit -> first prefill
line in the generate log), so runs with and without a setting compare on the same terms.

    python benchmarks/engine/engine_speed_walls.py RESULTS_DIR [RESULTS_DIR ...]    # JSON on stdout
"""

import json
import re
import sys
from datetime import datetime
from pathlib import Path

from variable_length import workflow_run

from shardgen.layout import Layout

PREFILL = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\] Prefill batch")


def walls(results: Path) -> dict:
    layout = Layout(results)
    run = workflow_run(layout.shard_dir(0))
    log = layout.log("generate", 0)
    prefill = next((m[1] for line in log.read_text(errors="replace").splitlines() if (m := PREFILL.match(line))),
                   None) if log.exists() else None
    # SGLang's log stamps are local wall time without a zone; the machine runs in UTC
    first_prefill = datetime.fromisoformat(prefill).replace(tzinfo=run["first"].tzinfo) if prefill else None
    return {"results": str(results), **{k: run[k] for k in ("requests", "completion_tokens", "wall_s", "output_tps",
                                                            "engine_start_s")},
            "engine_up_to_first_submit_s": round((run["first"] - run["ready"]).total_seconds(), 2),
            "first_submit_to_first_prefill_s": round((first_prefill - run["first"]).total_seconds(), 2)
            if first_prefill else None}


def main() -> None:
    print(json.dumps([walls(Path(p)) for p in sys.argv[1:]], indent=1))


if __name__ == "__main__":
    main()
