"""The report's figures say what the run shows: buckets sized to the run, the headline marked, no empty panels,
legends off the bars."""

import duckdb

from shardgen.store import db
from shardgen.generate import checkpoint

from shardgen.report import figures
from shardgen.layout import Layout, ReportLayout


def empty_connection(tmp_path):
    return checkpoint.connect(Layout(tmp_path / "results"))


def test_throughput_buckets_fit_the_run_and_the_headline_is_drawn(tmp_path):
    assert figures.bucket_seconds(12.0) == 1 and figures.bucket_seconds(4000.0) == 100
    con = empty_connection(tmp_path)
    db.define_views(con, "winners")
    fig = figures.throughput(con, {"dataset_output_tokens_per_s": 318.0, "dataset_generation_wall_s": 5.0})
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert any(label.startswith("headline 318 tok/s") for label in labels)
    assert "1 s buckets" in fig.axes[0].get_title()


def test_a_run_without_telemetry_gets_one_note_not_four_empty_panels(tmp_path):
    fig = figures.engine(empty_connection(tmp_path), {})
    assert len(fig.axes) == 1 and "No SGLang scheduler telemetry" in fig.axes[0].texts[0].get_text()


def test_the_shards_legend_is_below_the_bars(tmp_path):
    con = duckdb.connect()
    con.execute("CREATE VIEW parts AS SELECT 0 AS shard, 1 AS attempt, TIMESTAMPTZ '2026-01-01 00:00:00+00' AS "
                "submitted_at, TIMESTAMPTZ '2026-01-01 00:00:10+00' AS finished_at, 'p' AS filename, "
                "0 AS file_row_number, 10 AS completion_tokens")
    con.execute("CREATE VIEW turn_winners AS SELECT 'p' AS filename, 0 AS file_row_number")
    con.execute("CREATE VIEW winners AS SELECT 'k' AS gen_key, 'p' AS filename, 0 AS file_row_number")  # tail's
    fig = figures.shards(con, {})
    fig.canvas.draw()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent()
    assert legend.y1 <= ax.get_window_extent().y0


CPU_RUN = {"efficiency": [{"shard": 0, "note": "no SGLang telemetry (CPU engine): no efficiency"}],
           "forecast": {"hours_per_100000_prompts": 1.2, "gpus": 1, "tok_per_s_per_gpu": 300.0}}


def test_a_cpu_runs_outlook_is_a_note_inside_the_figure(tmp_path):
    fig = figures.outlook(empty_connection(tmp_path), CPU_RUN)
    fig.canvas.draw()
    ax = fig.axes[0]
    (note,) = ax.texts
    assert "No efficiency" in note.get_text() and "CPU engine" in note.get_text()
    assert fig.bbox.contains(*note.get_window_extent().min) and fig.bbox.contains(*note.get_window_extent().max)


def test_every_figure_draws_without_a_layout_warning(tmp_path):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # constrained_layout's "not applied" warning fails here
        con = empty_connection(tmp_path)
        db.define_views(con, "winners")
        paths = figures.draw(con, ReportLayout(tmp_path), CPU_RUN)
    assert [p.name for p in paths] == [f"{name}.png" for name in figures.FIGURES] and len(paths) == 6
    for path in paths:  # each one written whole: a PNG, not an empty or partial file
        data = path.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[-8:-4] == b"IEND" and len(data) > 1000, path


def synthetic_run():
    """A run of 2 shards as views: shard 0 makes 3 rows (100, 50, 30 tokens; at 1, 2 and 4.5 s after its first
    submission), shard 1 makes 1 row (40 tokens at 2.5 s); source a's rows are the turns 1, 2 and 1 of two
    conversations, source b's one row is cut by max_new_tokens."""
    con = duckdb.connect()
    rows = [  # shard, submitted s, finished s, completion_tokens, source, turn, finish_reason
        (0, 0.0, 1.0, 100, "a", 1, "stop"), (0, 0.5, 2.0, 50, "a", 2, "stop"), (0, 0.5, 4.5, 30, "a", 1, "stop"),
        (1, 0.0, 2.5, 40, "b", 1, "length")]
    values = ", ".join(f"({s}, 1, TIMESTAMPTZ '2026-01-01 00:00:00+00' + INTERVAL {int(sub * 1000)} MILLISECOND, "
                       f"TIMESTAMPTZ '2026-01-01 00:00:00+00' + INTERVAL {int(fin * 1000)} MILLISECOND, {tok}, "
                       f"'{src}', {turn}, '{why}', 'p', {i})"
                       for i, (s, sub, fin, tok, src, turn, why) in enumerate(rows))
    con.execute(f"CREATE TABLE parts AS SELECT * FROM (VALUES {values}) t(shard, attempt, submitted_at, finished_at, "
                "completion_tokens, source, turn, finish_reason, filename, file_row_number)")
    con.execute("CREATE VIEW turn_winners AS SELECT filename, file_row_number FROM parts")
    con.execute("CREATE VIEW winners AS SELECT 'k' || file_row_number AS gen_key, filename, file_row_number FROM parts")
    con.execute("CREATE VIEW dataset AS SELECT source, completion_tokens, finish_reason, turn FROM parts")
    con.execute("CREATE VIEW turns AS SELECT turn, completion_tokens FROM parts")
    return con, rows


def boxes(ax) -> list[tuple]:
    """(min, median, max) of each box of a boxplot without fliers: its lines are box, whisker x2, cap x2, median."""
    return [(lo.get_ydata()[0], mid.get_ydata()[0], hi.get_ydata()[0])
            for lo, hi, mid in zip(ax.lines[3::6], ax.lines[4::6], ax.lines[5::6], strict=True)]


def test_the_figures_data_series_are_the_runs_rows():
    con, rows = synthetic_run()
    fig = figures.throughput(con, {"dataset_generation_wall_s": 4.5})  # 1 s buckets
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    assert sorted(lines) == ["shard 0", "shard 1", "total"]
    assert list(lines["shard 0"].get_xdata()) == [1, 2, 4] and list(lines["shard 0"].get_ydata()) == [100, 50, 30]
    assert list(lines["shard 1"].get_xdata()) == [2] and list(lines["shard 1"].get_ydata()) == [40]
    assert list(lines["total"].get_xdata()) == [1, 2, 4] and list(lines["total"].get_ydata()) == [100, 90, 30]
    assert sum(lines["total"].get_ydata()) == sum(r[3] for r in rows)  # every token once, at 1 s a bucket

    fig = figures.lengths(con, {})
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a\n0% cut", "b\n100% cut"]
    assert boxes(ax) == [(30, 50, 100), (40, 40, 40)]  # source a's 100, 50, 30; b's 40

    fig = figures.turns(con, {})
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1\n3 rows", "2\n1 rows"]
    assert boxes(ax) == [(30, 40, 100), (50, 50, 50)]  # turn 1: 100, 30, 40; turn 2: 50

    fig = figures.shards(con, {})
    ax = fig.axes[0]
    heights = [round(p.get_height(), 6) for p in ax.patches]
    assert heights == [4.5, 2.5, 4.0, 2.5]  # walls (first submission to last finish), then tails (last submission on)
