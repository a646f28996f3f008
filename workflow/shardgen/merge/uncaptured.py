"""Turns of a captured source generated without capture: committed before `capture` was turned on for their source.
The sidecar has no row for them, and none is made up after the fact: a sidecar logprob is the generating engine's,
at the turn's sampling temperature, and a prefill re-score is another thing (SGLang scores a prefill at temperature
1 whatever the request's; `shardgen audit` is the route that re-scores, and says so). merge counts them per source
into the exports manifest; a run says them in one line as it starts (from the last merge's manifest), the report
again (from the parts)."""

import json

from shardgen.store import db
from shardgen.capture import Capture
from shardgen.layout import Layout


def per_source(con) -> dict[str, dict]:
    """Source -> {turns, captured}: its current turns and those generated with capture (con: the parts, winners)."""
    return {r["source"]: {"turns": r["turns"], "captured": r["captured"]} for r in db.query(con, "capture_turns")}


def missing(config, turns: dict[str, dict]) -> dict[str, int]:
    """Per source the config captures, its turns generated without capture (sources with none left out)."""
    capture = Capture.sidecar_of(config)
    if capture is None:
        return {}
    gaps = {source: c["turns"] - c["captured"] for source, c in turns.items() if capture.wants(source)}
    return {source: n for source, n in sorted(gaps.items()) if n}


def line(config, turns: dict[str, dict]) -> str | None:
    """The one line that says them, with what to do; None when every captured source's turns were captured."""
    if not (gaps := missing(config, turns)):
        return None
    named = ", ".join(f"{source}: {n}" for source, n in gaps.items())
    return (f"capture is on, but {sum(gaps.values())} turns of captured sources were generated before it (per "
            f"source: {named}): the sidecar has no row for them; `shardgen reset SHARD` regenerates a shard with "
            "capture (new tokens where sampled), `shardgen audit` re-scores a sample prefill-only")


def at_start(config, layout: Layout) -> str | None:
    """The line at the start of a run, from the last merge's manifest (none yet, or one written before these counts:
    nothing to say; that merge's manifest and the report will)."""
    try:
        manifest = json.loads(layout.exports_manifest.read_text())
    except (OSError, ValueError):
        return None
    turns = manifest.get("capture", {}).get("turns_per_source")
    return line(config, turns) if isinstance(turns, dict) else None
