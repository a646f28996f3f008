"""What is written and how: the pyarrow schema of every table (`tables`), the one durable write path (`atomic`),
the one flock-with-pid helper (`locks`), and DuckDB views over the results tree with the SQL files of workflow/sql
(`db`)."""
