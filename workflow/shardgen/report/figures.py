"""The report's figures (PNG, matplotlib without a display), each drawn from one query in workflow/sql/."""

import math
from pathlib import Path

from shardgen.store import db
from shardgen.store.atomic import committed
from shardgen.layout import ReportLayout
from shardgen.report.forecast import engine_rate, engine_words

BUCKETS = 40  # the throughput timeline's resolution: about this many buckets whatever the run's length


def _pyplot():
    """pyplot without a display, imported with the first figure: the workflow reads FIGURES as Snakemake parses it,
    and every `snakemake` call paid pyplot's import (0.5-0.8 s)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _subplots(*args, **kwargs):
    return _pyplot().subplots(*args, **kwargs)


def _save(fig, path: Path) -> None:
    with committed(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    _pyplot().close(fig)


def bucket_seconds(wall_s: float | None) -> int:
    return max(1, math.ceil((wall_s or 0) / BUCKETS))


def throughput(con, summary: dict):
    bucket = bucket_seconds(summary.get("dataset_generation_wall_s"))
    df = con.execute(db.prepared(con, "timeline"), {"bucket_s": bucket}).df()
    fig, ax = _subplots(figsize=(9, 4), layout="constrained")
    for shard, group in df.groupby("shard"):
        ax.plot(group["t"], group["output_tokens_per_s"], ".-", lw=1, label=f"shard {shard}")
    if not df.empty:
        total = df.groupby("t")["output_tokens_per_s"].sum()
        ax.plot(total.index, total.values, "k.-", lw=2, label="total")
    if headline := summary.get("dataset_output_tokens_per_s"):
        ax.axhline(headline, color="tab:red", ls="--", lw=1.5,
                   label=f"headline {headline:g} tok/s (dataset tokens / generation wall)")
    ax.set(title=f"Output tokens/s of the dataset's rows ({bucket} s buckets)", ylabel="tokens/s",
           xlabel="generation seconds (the run's clock: shards where they ran, time when none generated left out)")
    if ax.get_lines():
        ax.legend(fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.12))
    return fig


def engine(con, summary: dict):
    df = con.execute(db.sql("engine_timeline")).df()
    if df.empty:  # one note instead of four empty panels
        fig, ax = _subplots(figsize=(10, 2), layout="constrained")
        ax.axis("off")
        ax.text(0.5, 0.5, "No SGLang scheduler telemetry in this run (the CPU engine reports none):\n"
                "running requests, queue, KV and mamba usage are drawn for SGLang runs.", ha="center", va="center")
        return fig
    fig, axes = _subplots(2, 2, figsize=(10, 6), sharex=True, layout="constrained")
    panels = [("running", "running requests"), ("queue", "queue"), ("full_token_usage", "KV usage"),
              ("mamba_usage", "mamba usage")]
    for ax, (column, title) in zip(axes.flat, panels):
        for shard, group in df.groupby("shard"):
            ax.plot(group["ts"], group[column], lw=1, label=f"shard {shard}")
        ax.set_title(title)
    return fig


def lengths(con, summary: dict):
    df = con.execute(db.sql("lengths")).df()
    sources = sorted(df["source"].unique())
    fig, ax = _subplots(figsize=(9, 4), layout="constrained")
    ax.boxplot([df[df.source == s]["completion_tokens"] for s in sources], showfliers=False)
    ax.set_xticks(range(1, len(sources) + 1), [
        f"{s}\n{df[df.source == s]['cut'].mean():.0%} cut" for s in sources])
    ax.set(title="Output length per source (share cut off by max_new_tokens)", ylabel="completion tokens")
    return fig


def shards(con, summary: dict):
    df = con.execute(db.prepared(con, "tail")).df()
    fig, ax = _subplots(figsize=(9, 4), layout="constrained")
    ax.bar(df["shard"].astype(str), df["shard_wall_s"], label="generation wall (its attempts' spans)")
    ax.bar(df["shard"].astype(str), df["tail_s"], label="tail (after its last submission)")
    ax.set(title="Per-shard finish times", xlabel="shard", ylabel="seconds")
    ax.legend(ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.15))  # below the axes: never over a bar
    return fig


def outlook(con, summary: dict):
    """Achieved FLOP/s and bytes/s as shares of the GPU's peaks per shard, the forecast in the title."""
    rows = [r for r in summary.get("efficiency", []) if r.get("achieved_tflops") is not None]
    fig, ax = _subplots(figsize=(9, 4), layout="constrained")
    if rows:
        x = range(len(rows))
        ax.bar([i - 0.2 for i in x], [r["of_peak_tflops"] for r in rows], 0.4, label="FLOP/s of peak")
        ax.bar([i + 0.2 for i in x], [r["of_peak_tbps"] for r in rows], 0.4, label="bytes/s of peak")
        ax.set_xticks(list(x), [f"shard {r['shard']}\n{r['bound']}-bound" for r in rows])
        ax.set_ylim(0, 1)
        ax.legend()
    else:  # a note in place of empty axes (in axes coordinates: empty axes have no data range to place it in)
        ax.axis("off")
        ax.text(0.5, 0.5, "No efficiency: no shard has SGLang scheduler telemetry (the CPU engine reports none),\n"
                "or the GPU has no peaks (hardware.peaks adds them). The forecast above needs neither.",
                ha="center", va="center", transform=ax.transAxes)
    f = summary.get("forecast")
    if f:
        engine, engines = engine_words(f)
    ax.set_title("Efficiency vs the GPU's peaks" + (
        f"; forecast: {f['hours_per_100000_prompts']} h per 100,000 prompts on {engines} at "
        f"{engine_rate(f)} tok/s per {engine}" if f else ""), fontsize=9)
    return fig


def turns(con, summary: dict):
    """Output tokens by turn index: the spread per turn of a conversation, with each turn's row count."""
    df = con.execute("SELECT turn, completion_tokens FROM turns ORDER BY turn").df()
    index = sorted(df["turn"].unique())
    fig, ax = _subplots(figsize=(9, 4), layout="constrained")
    if index:
        ax.boxplot([df[df.turn == t]["completion_tokens"] for t in index], showfliers=False)
        ax.set_xticks(range(1, len(index) + 1), [f"{t}\n{(df.turn == t).sum()} rows" for t in index])
    else:
        ax.text(0.5, 0.5, "no generated rows", ha="center")
    ax.set(title="Output tokens by turn of the conversation", xlabel="turn", ylabel="completion tokens")
    return fig


FIGURES = {"throughput": throughput, "engine": engine, "lengths": lengths, "shards": shards, "outlook": outlook,
           "turns": turns}


def draw(con, report: ReportLayout, summary: dict | None = None) -> list[Path]:
    report.figures_dir.mkdir(parents=True, exist_ok=True)
    for name, figure in FIGURES.items():
        _save(figure(con, summary or {}), report.figure(name))
    return [report.figure(name) for name in FIGURES]
