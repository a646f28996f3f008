"""The report's figures (PNG, matplotlib without a display), each drawn from one query in workflow/sql/."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from shardgen import db  # noqa: E402



def _save(fig, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def throughput(con, path: Path) -> None:
    df = con.execute(db.sql("timeline")).df()
    fig, ax = plt.subplots(figsize=(9, 4))
    for shard, group in df.groupby("shard"):
        ax.plot(group["t"], group["output_tokens_per_s"], lw=1, label=f"shard {shard}")
    if not df.empty:
        total = df.groupby("t")["output_tokens_per_s"].sum()
        ax.plot(total.index, total.values, "k-", lw=2, label="total")
    ax.set(title="Output tokens/s (completions, 10 s buckets)", ylabel="tokens/s")
    ax.legend(fontsize=7, ncol=4)
    _save(fig, path)


def engine(con, path: Path) -> None:
    df = con.execute(db.sql("engine_timeline")).df()
    fig, axes = plt.subplots(2, 2, figsize=(10, 6), sharex=True)
    panels = [("running", "running requests"), ("queue", "queue"), ("full_token_usage", "KV usage"),
              ("mamba_usage", "mamba usage")]
    for ax, (column, title) in zip(axes.flat, panels):
        for shard, group in df.groupby("shard"):
            ax.plot(group["ts"], group[column], lw=1, label=f"shard {shard}")
        ax.set_title(title)
    if df.empty:
        fig.suptitle("no SGLang telemetry (CPU engine)")
    _save(fig, path)


def lengths(con, path: Path) -> None:
    df = con.execute(db.sql("lengths")).df()
    sources = sorted(df["source"].unique())
    fig, ax = plt.subplots(figsize=(9, 4))
    ax.boxplot([df[df.source == s]["completion_tokens"] for s in sources], showfliers=False)
    ax.set_xticks(range(1, len(sources) + 1), [
        f"{s}\n{df[df.source == s]['cut'].mean():.0%} cut" for s in sources])
    ax.set(title="Output length per source (share cut off by max_new_tokens)", ylabel="completion tokens")
    _save(fig, path)


def shards(con, path: Path) -> None:
    df = con.execute(db.sql("tail")).df()
    fig, ax = plt.subplots(figsize=(9, 4))
    ax.bar(df["shard"].astype(str), df["shard_wall_s"], label="first submit to end")
    ax.bar(df["shard"].astype(str), df["tail_s"], label="tail (after the last submission)")
    ax.set(title="Per-shard finish times", xlabel="shard", ylabel="seconds")
    ax.legend()
    _save(fig, path)


def outlook(con, path: Path, record: dict) -> None:
    """Achieved FLOP/s and bytes/s as shares of the GPU's peaks per shard, the forecast in the title."""
    rows = [r for r in record.get("efficiency", []) if r.get("achieved_tflops") is not None]
    fig, ax = plt.subplots(figsize=(9, 4))
    labels = [f"shard {r['shard']}\n{r['bound']}-bound" for r in rows]
    x = range(len(rows))
    ax.bar([i - 0.2 for i in x], [r["of_peak_tflops"] for r in rows], 0.4, label="FLOP/s of peak")
    ax.bar([i + 0.2 for i in x], [r["of_peak_tbps"] for r in rows], 0.4, label="bytes/s of peak")
    ax.set_xticks(list(x), labels)
    ax.set_ylim(0, 1)
    if rows:
        ax.legend()
    else:
        ax.text(0.5, 0.5, "no efficiency (no SGLang telemetry, or no peaks for the GPU)", ha="center")
    f = record.get("forecast")
    ax.set_title("Efficiency vs the GPU's peaks" + (
        f"; forecast: {f['hours_per_100000_prompts']} h per 100,000 prompts on {f['gpus']} GPU(s) at "
        f"{f['tok_per_s_per_gpu']} tok/s per GPU" if f else ""), fontsize=9)
    _save(fig, path)


FIGURES = {"throughput": throughput, "engine": engine, "lengths": lengths, "shards": shards, "outlook": outlook}


def draw(con, out_dir: Path, record: dict | None = None) -> list[Path]:
    """Every figure; `outlook` also takes the summary record (its efficiency and forecast)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, figure in FIGURES.items():
        if name == "outlook":
            figure(con, out_dir / f"{name}.png", record or {})
        else:
            figure(con, out_dir / f"{name}.png")
    return [out_dir / f"{name}.png" for name in FIGURES]
