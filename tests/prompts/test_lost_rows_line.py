"""The prompts stage ends, on the console Snakemake shows, with one line per source that lost rows: how many, the
most frequent reasons, and where every rejected row is; the rest of its output goes to its log (issue 38, item 11:
a malformed JSON line was said only in rejected.parquet, the report and the log)."""

import subprocess

from shardgen.layout import Layout

import preloaded

GOOD = {"question": "What is a good question?", "answer": "This one."}


def prompts(config, *args) -> subprocess.CompletedProcess:
    """`shardgen prompts` as the rule runs it: its own process, its own stdout and stderr."""
    out = Layout(config.results).prompts_dir
    return preloaded.run(["--config", str(config.write_resolved()), "prompts", "--out", str(out), *args])


def test_a_source_that_lost_rows_says_so_in_one_line_on_the_console(make_config, write_jsonl, tmp_path):
    bad = write_jsonl("bad.jsonl", [GOOD, '{"question": "unterminated', {"question": "", "answer": "x"},
                                    '[1, 2]', {"question": "   ", "answer": "y"}, {**GOOD, "question": "Another?"}])
    clean = write_jsonl("clean.jsonl", [{**GOOD, "question": f"Clean {i}?"} for i in range(3)])
    config = make_config([{"name": "bad", "path": bad, "format": "question_answer"},
                          {"name": "clean", "path": clean, "format": "question_answer"}])
    log = tmp_path / "prompts.log"
    console = prompts(config, "--log", str(log))
    assert console.returncode == 0, console.stderr[-3000:]
    rejected = Layout(config.results).prompt_table("rejected")
    line = (f"prompts: source bad lost 4 of 6 rows (empty_prompt 2, not_object 1, unreadable 1); each row, its reason "
            f"and detail: {rejected} (`shardgen query rejected_reasons`)")
    assert console.stderr.splitlines() == [line] and console.stdout == ""  # the clean source says nothing
    text = log.read_text()
    assert line in text and '"rejected": 4' in text and "prompts bad" in text  # counts and progress in the log


def test_without_a_log_the_line_ends_the_commands_output(make_config, write_jsonl):
    bad = write_jsonl("bad.jsonl", [GOOD, '{"question": "unterminated'])
    run = prompts(make_config([{"name": "bad", "path": bad, "format": "question_answer"}]))
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.splitlines()[-1].startswith("prompts: source bad lost 1 of 2 rows (unreadable 1); ")
