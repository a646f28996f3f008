"""Running requests, queue, KV usage and prompt tokens taken from the prefix cache over time, one column per arm,
from the SGLang log lines an engine-speed session keeps (benchmarks/sessions/engine_speed.sh collect: *.err.gz and
workflow-generate.log.gz, the Decode and Prefill batch lines only).

    python benchmarks/engine/plot_engine_speed.py OUT.png NAME=LOG.gz [NAME=LOG.gz ...]
"""

import gzip
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from shardgen.engines.sglang.log_lines import parse_line  # noqa: E402


def series(log: Path) -> list[dict]:
    with gzip.open(log, "rt", errors="replace") as lines:
        return [row for line in lines if (row := parse_line(line))]


def main() -> None:
    out, arms = Path(sys.argv[1]), [arg.split("=", 1) for arg in sys.argv[2:]]
    fig, axes = plt.subplots(4, len(arms), figsize=(4.2 * len(arms), 8), dpi=100, sharex="col", squeeze=False)
    for column, (name, log) in enumerate(arms):
        rows = series(Path(log))
        start = rows[0]["ts"] if rows else None
        t = [(r["ts"] - start).total_seconds() for r in rows]
        decode = [(x, r) for x, r in zip(t, rows) if r["kind"] == "decode"]
        prefill = [(x, r) for x, r in zip(t, rows) if r["kind"] == "prefill"]
        cached, total, shares = 0, 0, []
        for x, r in prefill:
            cached, total = cached + r["cached_token"], total + r["cached_token"] + r["new_token"]
            shares.append((x, cached / total if total else 0.0))
        panels = [("running", [(x, r["running"]) for x, r in decode]), ("queue", [(x, r["queue"]) for x, r in decode]),
                  ("KV usage", [(x, r["full_token_usage"]) for x, r in decode]),
                  ("cached share of prompt tokens (cumulative)", shares)]
        for row, (label, points) in enumerate(panels):
            ax = axes[row][column]
            if points:
                ax.plot(*zip(*points), lw=1)
            ax.set_ylabel(label, fontsize=8)
            if row == 0:
                ax.set_title(name, fontsize=9)
        axes[-1][column].set_xlabel("seconds since the first batch line")
    fig.tight_layout()
    fig.savefig(out)
    print(out)


if __name__ == "__main__":
    main()
