"""Disk the capture takes per million generated tokens, measured on a finished run's files (zstd, as written):
the sidecar (`exports/turns.topk.parquet`, float16) and the capture columns of the parts (float32, Parquet column
chunk sizes; every committed part, a retried turn's superseded row included, so a little over), beside the
layout's bytes before compression (2 + 6k a token in the sidecar, 4 + 8k in the parts).

    python benchmarks/capture/capture_disk.py --results results --out capture_disk.json
"""

import argparse
import json
from pathlib import Path

import pyarrow.parquet as pq

from shardgen.generate.checkpoint import ShardCheckpoint
from shardgen.layout import Layout

CAPTURE_COLUMNS = ("token_logprobs", "top_ids", "top_logprobs")


def column_bytes(path: Path, prefixes: tuple[str, ...]) -> int:
    """Compressed bytes of the column chunks whose path starts with one of `prefixes`."""
    meta = pq.ParquetFile(path).metadata
    return sum(meta.row_group(g).column(c).total_compressed_size
               for g in range(meta.num_row_groups) for c in range(meta.num_columns)
               if meta.row_group(g).column(c).path_in_schema.split(".")[0] in prefixes)


def measure(results: Path) -> dict:
    layout = Layout(results)
    sidecar = pq.read_table(layout.export("turns.topk.parquet"), columns=["logprobs", "top_ids"])
    tokens = sum(len(x) for x in sidecar["logprobs"].to_pylist())
    if not tokens:
        raise SystemExit(f"{layout.export('turns.topk.parquet')} holds no captured token: run with capture on")
    k = max((len(ids[0]) for ids in sidecar["top_ids"].to_pylist() if ids), default=0)
    parts = [p for shard in layout.split_shards() for p in ShardCheckpoint(layout, shard).parts()]
    part_bytes = sum(column_bytes(p, CAPTURE_COLUMNS) for p in parts)
    per_million = 1e6 / tokens
    return {"results": str(results), "k": k, "captured_tokens": tokens, "sidecar_rows": sidecar.num_rows,
            "per_million_tokens_mb": {
                "sidecar": round(layout.export("turns.topk.parquet").stat().st_size * per_million / 1e6, 1),
                "sidecar_uncompressed": round((2 + 6 * k), 1),
                "part_columns": round(part_bytes * per_million / 1e6, 1),
                "part_columns_uncompressed": round((4 + 8 * k), 1)}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, required=True)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    result = measure(args.results)
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
