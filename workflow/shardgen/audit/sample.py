"""The turns `shardgen audit` re-scores: a seeded sample of the run's current generated turns, drawn by
workflow/sql/internal/audit_sample.sql over the dataset query (the rows merge would write), and kept in the audit
folder so every setting scores the same turns."""

from pathlib import Path

import pyarrow.parquet as pq

from shardgen.store import db
from shardgen.store.atomic import committed
from shardgen.config import Config, ConfigError
from shardgen.generate import checkpoint
from shardgen.layout import Layout


def write_sample(config: Config, out: Path, n: int, seed: int) -> int:
    """Up to `n` turns drawn with `seed`, written to `out`; how many. Refuses a run with no generated turn."""
    if n < 1:
        raise ConfigError(f"--sample {n}: at least one turn is scored")
    layout = Layout(config.results)
    con = checkpoint.connect(layout)  # every shard's parts, as the checkpoint reads them
    con.execute(f"CREATE OR REPLACE TEMP VIEW current_turns AS {db.prepared(con, 'dataset')}")
    table = con.sql(db.prepared(con, "audit_sample"),
                    params={"seed": seed, "n": n, "context_length": config.model.context_length}).to_arrow_table()
    if table.num_rows == 0:
        raise ConfigError(f"nothing to audit: {layout.root} holds no generated turn of the current prompt set; "
                          "generate first (`snakemake --configfile YOUR_CONFIG`), then audit")
    with committed(out) as tmp:
        pq.write_table(table, tmp)
    return table.num_rows
