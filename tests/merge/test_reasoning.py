"""merge/reasoning.py's macros on their own: a completion split at the reasoning tags into reasoning_content and
content (Qwen3's layout), an unclosed block flagged and left whole, no tags configured: no split."""

import duckdb
import pytest

from shardgen.merge.reasoning import define_macros

TAGS = ["<think>", "</think>"]


def split(text: str, tags=TAGS) -> tuple:
    con = duckdb.connect()
    define_macros(con, tags)
    return con.execute("SELECT reasoning_of($t), content_of($t), reasoning_unclosed($t)", {"t": text}).fetchone()


@pytest.mark.parametrize("text, expected", [
    ("<think>\nweigh it\n</think>\n\nThe answer.", ("weigh it", "The answer.", False)),  # Qwen3's own layout
    ("<think>a</think>b", ("a", "b", False)),
    ("\n <think>a\n\n</think>\nb\nc", ("a", "b\nc", False)),  # leading blanks before the open tag
    ("reasoning the prompt opened</think>answer", ("reasoning the prompt opened", "answer", False)),
    ("<think>a</think>b</think>c", ("a", "b</think>c", False)),  # the first close tag splits
    ("plain answer", (None, "plain answer", False)),
    ("<think>cut in the middle", (None, "<think>cut in the middle", True)),  # unclosed: flagged, not split
])
def test_a_completion_splits_at_its_reasoning_tags(text, expected):
    assert split(text) == expected


def test_other_tags_and_no_tags():
    assert split("[r]x[/r]y", ["[r]", "[/r]"]) == ("x", "y", False)
    assert split("<think>a</think>b", None) == (None, "<think>a</think>b", False)
