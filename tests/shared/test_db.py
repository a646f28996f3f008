"""Each query declares what it reads (`-- requires:`) and db defines it first: no caller lists a query's
prerequisites by hand."""

import duckdb

from shardgen.store import db
from shardgen.generate import checkpoint
from shardgen.layout import Layout


def test_every_declared_requirement_is_a_query_and_none_is_circular():
    names = [p.stem for folder in (db.SQL_DIR, db.INTERNAL_SQL_DIR) for p in folder.glob("*.sql")]
    assert {"summary", "winners", "timeline"} <= set(names)
    for name in names:
        seen, todo = set(), list(db.requires(name))
        while todo:
            need = todo.pop()
            assert need != name, f"{name} requires itself"
            assert need in names, f"{name} requires {need!r}, which is no query"
            if need not in seen:
                seen.add(need)
                todo += db.requires(need)


def test_a_query_defines_what_it_requires_on_an_empty_run(tmp_path):
    con = checkpoint.connect(Layout(tmp_path / "results"))
    assert db.requires("throughput") == ["per_shard", "clock"] and db.requires("per_shard") == ["winners"]
    assert db.query(con, "throughput")  # per_shard and the clock, and winners under them, defined on the way
    names = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() UNION ALL "
                                       "SELECT table_name FROM duckdb_tables()").fetchall()}
    assert {"per_shard", "winners", "turn_winners", "outcomes", "dataset_made"} <= names


def test_a_view_a_step_defined_first_is_kept():
    con = duckdb.connect()
    con.execute("CREATE VIEW outcomes AS SELECT 'p' AS prompt_id, 's' AS source, 'missing' AS outcome, "
                "NULL AS end_reason, 1 AS turns, 0 AS generated_turns")
    con.execute("CREATE VIEW winners AS SELECT 'k' AS gen_key")
    # winners is there, so its script (which needs parts and prompts, absent here) is not run over it
    assert db.query(con, "missing") == [{"prompt_id": "p", "source": "s"}]
