"""The report's figures say what the run shows: buckets sized to the run, the headline marked, no empty panels,
legends off the bars."""

import duckdb

from shardgen import db
from shardgen.generate import checkpoint

from shardgen.report import figures
from shardgen.layout import Layout


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
                "0 AS file_row_number")
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
        figures.draw(con, tmp_path / "figures", CPU_RUN)
