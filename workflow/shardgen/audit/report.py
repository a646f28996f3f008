"""What `shardgen audit` found: summary.json (per setting: the engine it ran with and its figures) and turns.parquet
(tables.AUDIT_TURNS: one row per setting and sampled turn, to query with DuckDB), and the text the command prints."""

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from shardgen.store import tables
from shardgen.store.atomic import committed, write_text
from shardgen.audit import metrics
from shardgen.layout import AuditLayout

DIFF_COLUMNS = ("mean_abs", "p99_abs", "max_abs")


def write(audit_dir: Path, plan: dict, outcomes: list[dict]) -> dict:
    audit = AuditLayout(audit_dir)
    turns = pq.read_table(audit.sample).to_pylist()

    def in_sample_order(index: int) -> list[dict]:  # a setting's scores, read once
        by_key = {r["gen_key"]: r for r in pq.read_table(audit.scores(index)).to_pylist()}
        return [by_key[t["gen_key"]] for t in turns]

    own = in_sample_order(0) if outcomes[0]["status"] == "ok" else None
    settings, rows = [], []
    for index, (setting, outcome) in enumerate(zip(plan["settings"], outcomes, strict=True)):
        entry = {"setting": setting["name"], "numerics_change": setting["numerics_change"], **outcome}
        if outcome["status"] == "ok":
            scores = own if index == 0 and own is not None else in_sample_order(index)
            turn_rows = [metrics.turn_row(setting["name"], t, s, plan["top_k"]) for t, s in zip(turns, scores)]
            entry.update(metrics.setting_figures(turns, scores, plan["top_k"], None if index == 0 else own),
                         most_drift=metrics.most_drift(turn_rows))
            rows += turn_rows
        settings.append(entry)
    summary = {"sample": {"requested": plan["sample"], "turns": plan["sample_rows"], "seed": plan["seed"],
                          "top_k": plan["top_k"]}, "settings": settings}
    with committed(audit.turns) as tmp:
        pq.write_table(pa.Table.from_pylist(rows, schema=tables.AUDIT_TURNS), tmp)
    write_text(json.dumps(summary, indent=1), audit.summary)
    return summary


def _share(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _diff(figures: dict | None, column: str) -> float | None:
    return None if figures is None else _round(figures[column])


def overview(summary: dict) -> list[dict]:
    """One row per setting: what the command prints first."""
    rows = []
    for s in summary["settings"]:
        row = {"setting": s["setting"], "status": s["status"], "turns": s.get("turns"), "tokens": s.get("tokens"),
               "argmax_match": _share(s.get("argmax_match")), "in_top_k": _share(s.get("in_top_k")),
               "compared": s.get("compared_turns")}
        row.update({f"vs_gen_{c}": _diff(s.get("logprob_diff"), c) for c in DIFF_COLUMNS})
        row.update({f"vs_own_{c}": _diff(s.get("versus_own"), c) for c in DIFF_COLUMNS})  # none for own itself
        rows.append(row)
    return rows


def drift_table(setting: dict) -> list[dict]:
    """A setting's turns that drift most, in the columns that say how."""
    keep = ("conversation_id", "turn", "tokens", "argmax_match", "in_top_k", "logprob_diff_mean_abs",
            "logprob_diff_max_abs", "first_argmax_mismatch")
    rounded = {"argmax_match": _share, "in_top_k": _share, "logprob_diff_mean_abs": _round,
               "logprob_diff_max_abs": _round}
    return [{k: rounded.get(k, lambda v: v)(row[k]) for k in keep} for row in setting.get("most_drift", ())]


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)
