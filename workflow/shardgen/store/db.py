"""DuckDB over the results tree: named views of every table, and the SQL files in workflow/sql/ run against them."""

import glob
import re

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from shardgen import WORKFLOW_DIR, ShardgenError
from shardgen.store import tables
from shardgen.layout import TELEMETRY_FILE_SHARD_REGEX, Layout, shard_number
from shardgen.sampling import names

SQL_DIR = WORKFLOW_DIR / "sql"
INTERNAL_SQL_DIR = SQL_DIR / "internal"  # parameterized or view-building queries the steps run, not a user
# A query names the queries it reads (each defined first as a view of that name, or run when it is a script) in a
# comment line of its own: `-- requires: winners, per_shard`. The base views of connect() need no mention.
REQUIRES = re.compile(r"^--\s*requires:\s*(.+)$", re.M)


def quote(path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def parquet_view(con, name: str, path_or_glob: str, schema: pa.Schema) -> None:
    """The files as one view of the contract's columns: read by column name (union_by_name), so a file written
    before a column was added reads it as null, and a column no file has yet is null too. (Parts are the
    checkpoint's: generate/checkpoint.py reads them.)"""
    if glob.glob(path_or_glob):
        source = f"read_parquet({quote(path_or_glob)}, union_by_name=true)"
        have = {row[0] for row in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
        added = "".join(f', CAST(NULL AS {duckdb_type(f.type)}) AS "{f.name}"' for f in schema if f.name not in have)
        con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT *{added} FROM {source}")
    else:  # an empty table of the contract's schema, so queries still run before anything exists
        con.register(f"_{name}_empty", schema.empty_table())
        con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM _{name}_empty")


def connect(layout: Layout, memory_limit: str | None = None) -> duckdb.DuckDBPyConnection:
    """Every table of the results tree but the parts, which the checkpoint owns: checkpoint.connect adds them."""
    con = duckdb.connect()
    con.execute("SET preserve_insertion_order = false")  # lets large COPYs stream
    if memory_limit:
        con.execute(f"SET memory_limit = {quote(memory_limit)}")
    # the sampling columns' names, which the dataset query selects by (shardgen.sampling.FIELDS)
    con.execute("SET VARIABLE sampling_fields = ?", [list(names())])
    for name, schema in (("prompts", tables.PROMPTS), ("rejected", tables.REJECTED),
                         ("duplicates", tables.DUPLICATES), ("sources", tables.SOURCES)):
        parquet_view(con, name, str(layout.prompt_table(name)), schema)
    parquet_view(con, "dataset", layout.dataset_glob, tables.DATASET)
    turns_view(con)
    _telemetry_view(con, layout)
    _split_table(con, layout)
    return con


def _split_table(con, layout: Layout) -> None:
    """`split`: each shard of the current split (its split file) and its prompts, from the files' footers."""
    con.execute("CREATE OR REPLACE TEMP TABLE split (shard INTEGER, prompts BIGINT)")
    if files := layout.split_files():
        con.executemany("INSERT INTO split VALUES (?, ?)",
                        [(shard_number(path), pq.read_metadata(path).num_rows) for path in files])


def turns_view(con) -> None:
    """`turns`: the dataset with its conversation_id and turn; a dataset written before those columns existed reads
    as single-turn conversations (conversation_id = prompt_id, turn 1). Call again after redefining `dataset`."""
    columns = {row[0] for row in con.execute("DESCRIBE dataset").fetchall()}
    extra = "" if {"conversation_id", "turn"} <= columns else \
        ", prompt_id AS conversation_id, CAST(1 AS INTEGER) AS turn"
    con.execute(f"CREATE OR REPLACE VIEW turns AS SELECT *{extra} FROM dataset")


def _telemetry_view(con, layout: Layout) -> None:
    """SGLang telemetry of every shard, with its shard number (empty for the CPU engine)."""
    pattern = layout.telemetry_glob
    if glob.glob(pattern):
        con.execute("CREATE OR REPLACE VIEW telemetry AS SELECT *, CAST(regexp_extract(filename, "
                    f"{quote(TELEMETRY_FILE_SHARD_REGEX)}, 1) AS INTEGER) AS shard FROM read_parquet({quote(pattern)}, "
                    "filename = true)")
    else:
        con.register("_telemetry_empty",
                     tables.TELEMETRY.empty_table().append_column("shard", pa.array([], pa.int32())))
        con.execute("CREATE OR REPLACE VIEW telemetry AS SELECT * FROM _telemetry_empty")


def sql(name: str) -> str:
    """The text of workflow/sql/NAME.sql, or of workflow/sql/internal/NAME.sql (the steps' own queries)."""
    for folder in (SQL_DIR, INTERNAL_SQL_DIR):
        if (path := folder / f"{name}.sql").is_file():
            return path.read_text()
    raise ShardgenError(f"no query named {name!r}; known: {', '.join(user_queries())}")


def user_queries() -> dict[str, str]:
    """The queries a user runs by name (`shardgen query NAME`), each with its purpose: the first sentence of its
    leading comment."""
    return {path.stem: _purpose(path.read_text()) for path in sorted(SQL_DIR.glob("*.sql"))}


def is_internal(name: str) -> bool:
    return (INTERNAL_SQL_DIR / f"{name}.sql").is_file()


def _purpose(text: str) -> str:
    comment = " ".join(line[2:].strip() for line in text.splitlines()
                       if line.startswith("--") and not REQUIRES.match(line))
    return comment.split(". ")[0].rstrip(".")


def requires(name: str) -> list[str]:
    """The queries NAME reads, from its `-- requires:` line."""
    found = REQUIRES.search(sql(name))
    return [need.strip() for need in found.group(1).split(",")] if found else []


def _defined(con, name: str) -> bool:
    return con.execute("SELECT count(*) FROM (SELECT view_name AS name FROM duckdb_views() UNION ALL "
                       "SELECT table_name FROM duckdb_tables()) WHERE name = ?", [name]).fetchall()[0][0] > 0


def prepare(con, name: str) -> None:
    """Define on con what query NAME requires, each after its own requirements; one already defined is kept (a
    step may define a view its own way first, as merge does `dataset`)."""
    for need in requires(name):
        if not _defined(con, need):
            prepare(con, need)
            define_views(con, need)


def prepared(con, name: str) -> str:
    """The text of query NAME, with what it requires defined on con (to embed it, as in a COPY)."""
    prepare(con, name)
    return sql(name)


def query(con, name: str, **params) -> list[dict]:
    """Run query NAME (named $parameters), its requirements defined first, and return its rows as dicts."""
    cursor = con.execute(prepared(con, name), params or None)
    columns = [d[0] for d in cursor.description]
    return [dict(zip(columns, row)) for row in cursor.fetchall()]


def define_views(con, *names: str) -> None:
    """Make query NAME available to later queries as a view of that name, or run it when it is a script of
    statements (winners: its tables)."""
    for name in names:
        text = prepared(con, name)
        body = "\n".join(line for line in text.splitlines() if not line.startswith("--")).lstrip()
        if body.upper().startswith("CREATE"):  # a script makes its own tables and macros
            con.execute(text)
        else:
            con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS {text}")


_SCALARS = {"string": "VARCHAR", "large_string": "VARCHAR", "int64": "BIGINT", "int32": "INTEGER",
            "int16": "SMALLINT", "int8": "TINYINT", "double": "DOUBLE", "float": "FLOAT", "bool": "BOOLEAN"}


def duckdb_type(kind: pa.DataType) -> str:
    """An Arrow type as DuckDB names it (as DuckDB reads it from Arrow or Parquet): lists, structs, scalars."""
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return f"{duckdb_type(kind.value_type)}[]"
    if pa.types.is_struct(kind):
        return "STRUCT(" + ", ".join(f'"{f.name}" {duckdb_type(f.type)}' for f in kind) + ")"
    if pa.types.is_timestamp(kind):
        return "TIMESTAMP WITH TIME ZONE" if kind.tz else "TIMESTAMP"
    return _SCALARS[str(kind)]


def create_empty(con, name: str, schema: pa.Schema) -> None:
    """An empty temp table of the contract's schema, made without Arrow (registering an Arrow table in DuckDB
    imports pandas: a fifth of a second of `shardgen status`)."""
    columns = ", ".join(f'"{f.name}" {duckdb_type(f.type)}' for f in schema)
    con.execute(f"CREATE OR REPLACE TEMP TABLE {name} ({columns})")
