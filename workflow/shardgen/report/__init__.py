"""Stage 5 and every read-only view of a run: the report (`summary`, `figures`, `efficiency_forecast`), `diagnose`
with `efficiency`, `roofline` and `peaks`, `forecast`, and the live `status` with its `eta`."""
