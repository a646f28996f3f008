"""The running-request count over time of each arm of a variable_length.py result, as one small PNG.

    python benchmarks/engine/plot_running.py benchmarks/results/2026-12-03-h200-variable-length.json
"""

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LABELS = {"a": "(a) Engine.generate, dataset order", "a_prime": "(a') Engine.generate, heaviest first",
          "b": "(b) shardgen workflow"}


def main(path: Path) -> Path:
    run = json.loads(path.read_text())
    fig, ax = plt.subplots(figsize=(7, 3.2), dpi=100)
    for name, arm in run["arms"].items():
        t, running = zip(*arm["running_series"]) if arm["running_series"] else ((), ())
        ax.plot(t, running, label=f"{LABELS[name]}: {arm['wall_s']:.0f} s", lw=1.2)
    b = run["arms"]["b"]
    ax.axvline(b["makespan_floor_s"], color="grey", ls=":", lw=1,
               label=f"floor {b['makespan_floor_s']:.0f} s ({b['longest_request_tokens']:,} steps)")
    gpu = (run.get("engine") or {}).get("gpu_name") or "one GPU"
    ax.set(xlabel="seconds since first submit", ylabel="running requests",
           title=f"variable-length work, {gpu}, SGLang {run['sglang_version']}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    out = path.with_name(path.stem + "-running.png")
    fig.savefig(out)
    return out


if __name__ == "__main__":
    print(main(Path(sys.argv[1])))
