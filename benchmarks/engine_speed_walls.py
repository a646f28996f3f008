"""Per results folder of a one-shard workflow run: generation wall (first submit to last completion), output tok/s,
and where the time before the first request went (attempt start -> engine up -> first submit -> first prefill
line in the generate log), so runs with and without a setting compare on the same terms.

    python benchmarks/engine_speed_walls.py RESULTS_DIR [RESULTS_DIR ...]    # JSON on stdout
"""

import json
import re
import sys
from datetime import datetime
from pathlib import Path

import duckdb

from shardgen.layout import ATTEMPTS, Layout, parts_glob

PREFILL = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\] Prefill batch")


def walls(results: Path) -> dict:
    layout = Layout(results)
    shard_dir = layout.shard_dir(0)
    first, last, tokens, n = duckdb.sql(f"SELECT min(submitted_at), max(finished_at), sum(completion_tokens), "
                                        f"count(*) FROM read_parquet('{parts_glob(shard_dir)}')").fetchall()[0]
    events = [json.loads(x) for x in (shard_dir / ATTEMPTS).read_text().splitlines()]
    started = next(datetime.fromisoformat(e["started_at"]) for e in events if "started_at" in e)
    ready = next(datetime.fromisoformat(e["at"]) for e in events if e.get("event") == "engine_started")
    log = layout.log("generate", 0)
    prefill = next((m[1] for line in log.read_text(errors="replace").splitlines() if (m := PREFILL.match(line))),
                   None) if log.exists() else None
    # SGLang's log stamps are local wall time without a zone; the machine runs in UTC
    first_prefill = datetime.fromisoformat(prefill).replace(tzinfo=first.tzinfo) if prefill else None
    wall = (last - first).total_seconds()
    return {"results": str(results), "requests": n, "completion_tokens": int(tokens), "wall_s": round(wall, 2),
            "output_tps": round(tokens / wall, 1), "engine_start_s": round((ready - started).total_seconds(), 1),
            "engine_up_to_first_submit_s": round((first - ready).total_seconds(), 2),
            "first_submit_to_first_prefill_s": round((first_prefill - first).total_seconds(), 2)
            if first_prefill else None}


def main() -> None:
    print(json.dumps([walls(Path(p)) for p in sys.argv[1:]], indent=1))


if __name__ == "__main__":
    main()
