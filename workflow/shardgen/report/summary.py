"""Stage 5: the report folder's summary, manifest and markdown (layout.ReportLayout), every figure computed by the SQL
files in workflow/sql/."""

import json
import platform
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from shardgen.store import db
from shardgen.store.atomic import write_text
from shardgen.capture import HiddenCapture
from shardgen.config import Config
from shardgen.generate import checkpoint
from shardgen.report.figures import draw
from shardgen.merge import uncaptured
from shardgen.merge.exports import text_exports_note
from shardgen.merge.freshness import check_dataset
from shardgen.layout import Layout, ReportLayout
from shardgen.report.efficiency_forecast import markdown as outlook_markdown, outlook
from shardgen.prompts.sources import file_sha256

VERSIONED = ("shardgen", "snakemake", "duckdb", "pyarrow", "torch", "transformers", "sglang", "tokenizers", "datasets")


def _versions() -> dict:
    found = {"python": platform.python_version()}
    for name in VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


def _jsonable(rows: list[dict]) -> list[dict]:
    return json.loads(json.dumps(rows, default=str))


def summary(con) -> dict:
    record = _jsonable(db.query(con, "summary"))[0]
    record["per_shard"] = _jsonable(db.query(con, "per_shard"))
    record["per_source"] = _jsonable(db.query(con, "per_source"))
    record["per_turn"] = _jsonable(db.query(con, "tokens_by_turn"))
    return record


def manifest(con, config: Config, per_source: list[dict], outputs: list[Path], done_files: list[Path]) -> dict:
    model = config.target_model
    rejected = db.query(con, "rejected_reasons")
    sources = {r["source"]: dict(r) for r in per_source}
    for row in con.execute("SELECT source, origin, fingerprint FROM sources").fetchall():
        sources[row[0]].update(origin=row[1], fingerprint=row[2],
                               rejected_by_reason={r["reason"]: r["rows"] for r in rejected if r["source"] == row[0]})
    files = []
    for path in outputs:
        # a folder (by hand, `results/exports/*` takes exports/hidden/ once an export was made): its files' count
        # and bytes, not one digest
        if path.is_dir():
            held = [p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".snakemake")]
            files.append({"path": str(path), "files": len(held), "bytes": sum(p.stat().st_size for p in held)})
            continue
        reader = {".jsonl": "read_json_auto", ".parquet": "read_parquet"}.get(path.suffix)  # else a sidecar: no rows
        rows = reader and con.execute(f"SELECT count(*) FROM {reader}({db.quote(path)})").fetchall()[0][0]
        files.append({"path": str(path), "rows": rows, "sha256": file_sha256(path)})
    done = [checkpoint.required_done(p) for p in done_files]
    return {
        "sources": list(sources.values()),
        "model": model.record(),
        "sampling": {"defaults": config.defaults.as_dict(),
                     "per_source": {s.name: config.sampling_for(s, model.served_sampling) for s in config.sources},
                     "origin_per_source": {s.name: config.sampling_origins(s, model.served_sampling)
                                           for s in config.sources}},
        "seed": config.seed,
        "engine": {"config": config.engine.as_dict(), "resolved": [d["engine"] for d in done if d.get("engine")]},
        "versions": _versions(),
        "outputs": files,
        "note": "the seed seeds the engine; per-prompt reproducibility is not promised",
    }


def hidden_states(config: Config, layout: Layout, done_files: list[Path]) -> dict | None:
    """summary.json's `hidden_states`, from merge's manifest: the dataset's turns captured, the layers and dtype, the
    bytes of the parts' states files (the one copy), and the trainers whose export can be made; and from the done
    files, the capture passes' time (`pass`); None when off."""
    if HiddenCapture.of(config) is None:
        return None
    merged = json.loads(layout.exports_manifest.read_text())["hidden_states"]
    return {"turns_captured": merged["turns_captured"], "turns": merged["turns"], "layer_set": merged["layer_set"],
            "layers": merged["layers"], "dtype": merged["dtype"], "parts_files": merged["parts"]["files"],
            "parts_bytes": merged["parts"]["bytes"], "exportable": sorted(merged["exports"]),
            "skipped": merged["skipped"], "pass": capture_pass_time(done_files)}


def capture_pass_time(done_files: list[Path]) -> dict:
    """The engines' hidden-state pass records (done file engine.hidden_pass: turns, positions, the passes' summed
    seconds, and on SGLang the hand-off's split, `hook` the scheduler side's) added up over the shards."""
    total: dict = {}

    def add(into: dict, record: dict) -> None:
        for key, value in record.items():
            if isinstance(value, dict):
                add(into.setdefault(key, {}), value)
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                into[key] = round(into.get(key, 0) + value, 3)

    for path in done_files:
        if (done := checkpoint.read_done(path)) and (record := (done.get("engine") or {}).get("hidden_pass")):
            add(total, record)
    return total


def text_exports_line(layout: Layout) -> str | None:
    """report.md's line where the text exports leave conversations out, from merge's manifest (none without one: a
    report made by hand over a merge that wrote none)."""
    if not layout.exports_manifest.is_file():
        return None
    return text_exports_note(layout, json.loads(layout.exports_manifest.read_text())["text_exports"])


def hidden_line(hidden: dict | None) -> str:
    """report.md's line on the hidden states ("" when off)."""
    if hidden is None:
        return ""
    exports = (f"each trainer's export on demand: `shardgen export-hidden --trainer "
               f"{'|'.join(hidden['exportable'])}`" if hidden["exportable"] else
               f"no export can be made ({'; '.join(sorted(set(hidden['skipped'].values())))})")
    passes = hidden["pass"]
    spent = (f"; the capture passes re-read {passes['positions']:,} positions in {passes['pass_s']:,.1f} s summed over "
             "turns (docs/engine.md: the split)" if passes.get("positions") else "")
    return (f"\nHidden states: {hidden['turns_captured']} of {hidden['turns']} turns captured at layers "
            f"{hidden['layers']} ({hidden['dtype']}), {hidden['parts_bytes']:,} bytes in "
            f"{hidden['parts_files']} parts' states files{spent}; {exports}.\n")


def tail_note(tails: list[dict]) -> str | None:
    """Across shards the tail is the longest shard's generation wall less the shortest's (tail.sql: the dataset's
    rows, on the headline's clock); over 5% of the run's generation wall is called out."""
    if not tails or not tails[0]["run_wall_s"]:
        return None
    spread = max(t["after_first_shard_end_s"] for t in tails)
    share = spread / tails[0]["run_wall_s"]
    verdict = ("**over 5% of the generation wall: side by side, the other shards' engines would idle that long "
               "while the longest finished**" if share > 0.05 else "fine")
    # A shard made in several attempts (a retry, a rerun after a kill) has their spans summed: say so, since its
    # attempts did not run beside the other shards.
    rerun = [str(t["shard"]) for t in tails if t.get("attempts", 1) > 1]
    attempts = f" Shard(s) {', '.join(rerun)} made their rows in several attempts, their spans summed." if rerun else ""
    return f"Tail across shards: {spread:.1f} s between the shortest and the longest shard's generation wall, " \
           f"{share:.1%} of the {tails[0]['run_wall_s']:.1f} s generation wall ({verdict}).{attempts}"


def split_note(per_shard: list[dict]) -> str | None:
    """report.md's line where the parts hold shard folders of an earlier split with more shards (per_shard.sql: no
    prompts in the current one)."""
    current = [s for s in per_shard if s["prompts"] is not None]
    earlier = [str(s["shard"]) for s in per_shard if s["prompts"] is None]
    if not current or not earlier:
        return None
    return (f"The split has {len(current)} shard(s) ({sum(s['prompts'] for s in current)} prompts); shard folder(s) "
            f"{', '.join(earlier)} are of an earlier split: the rows they made count, and they hold no prompts now.")


def markdown_table(rows: list[dict]) -> list[str]:
    """Query rows as a markdown table (blank for NULL)."""
    head = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    return head + ["| " + " | ".join("" if v is None else str(v) for v in r.values()) + " |" for r in rows]


def markdown(record: dict, tails: list[dict] | None = None, figures: Sequence[Path] = ()) -> str:
    lines = ["# shardgen report", "", "| metric | value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in record.items() if not isinstance(v, (list, dict))]
    if "dataset_rows_checked" in record:
        lines += ["", f"Checked: all {record['dataset_rows_checked']} dataset rows carry the gen_key the current "
                      "config gives their prompt (model, tokenizer and template hashes, sampling), one per generated "
                      "prompt."]
    if record.get("failed"):
        lines += ["", f"Failed: {record['failed']} of {record['prompts_accepted']} prompts (a turn whose every "
                      "attempt the engine aborted): `shardgen query failed` lists each with the engine's message; "
                      "`shardgen retry`, then a run of the workflow, generates them again."]
    for title in ("per_source", "per_shard", "per_turn"):
        rows = record.get(title)
        if rows:
            lines += ["", f"## {title}", "", *markdown_table(rows)]
    if note := tail_note(tails or []):
        lines += ["", note]
    if note := split_note(record.get("per_shard", [])):
        lines += ["", note]
    lines += [""] + [f"![{p.stem}]({p.parent.name}/{p.name})" for p in figures]
    return "\n".join(lines) + "\n"


def report(config: Config, outputs: list[Path], done_files: list[Path], out_dir: Path) -> dict:
    layout = Layout(config.results)
    con = checkpoint.connect(layout)
    record = summary(con)
    record["dataset_rows_checked"] = check_dataset(config, layout.dataset,
                                                   record["generated"] + record["failed_partly"])
    capture_turns = uncaptured.per_source(con)
    record["capture_turns_not_captured"] = sum(uncaptured.missing(config, capture_turns).values())
    if (hidden := hidden_states(config, layout, done_files)) is not None:
        record["hidden_states"] = hidden
    record.update(outlook(config, layout, done_files, record))
    files = ReportLayout(out_dir)
    write_text(json.dumps(record, indent=1), files.summary)
    write_text(json.dumps(manifest(con, config, record["per_source"], outputs, done_files), indent=1, default=str),
               files.manifest)
    figures = draw(con, files, record)
    note = uncaptured.line(config, capture_turns)
    text = text_exports_line(layout)
    write_text(markdown(record, _jsonable(db.query(con, "tail")), figures) + (f"\nCapture: {note}.\n" if note else "")
               + (f"\nText exports: {text}.\n" if text else "") + hidden_line(record.get("hidden_states"))
               + outlook_markdown(record), files.markdown)
    return record
