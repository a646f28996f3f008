"""A thinking model's answer split at its reasoning tags (`model.reasoning_tags`, `<think>`/`</think>` by default)
into `reasoning_content` and the visible `content`, as DuckDB macros the dataset and the text exports share.
Only merge splits: what generate feeds back into the next turn (the whole completion text) is unchanged.

The layout follows Qwen3's template, which renders an assistant turn as `<think>\\n` + reasoning + `\\n</think>\\n\\n`
+ content: reasoning is the text before the first close tag, without a leading open tag and the newlines around it;
content is the text after the close tag, without its leading newlines. A completion that opens reasoning and never
closes it (cut, or a stop inside the reasoning) is flagged (`reasoning_unclosed`) and not split: its content is the
whole completion and its reasoning_content null, as for an answer without tags. Reasoning the prompt opened (a
template whose generation prompt ends with the open tag) and the completion never closed reads as an answer
without tags: merge sees the completion's text, not the prompt's."""

from shardgen.store import db

NEWLINE = "chr(10)"


def define_macros(con, tags: list[str] | None) -> None:
    """content_of(text), reasoning_of(text) and reasoning_unclosed(text) on con, for these [open, close] tags."""
    if tags is None:
        con.execute("CREATE OR REPLACE TEMP MACRO content_of(text) AS text")
        con.execute("CREATE OR REPLACE TEMP MACRO reasoning_of(text) AS CAST(NULL AS VARCHAR)")
        con.execute("CREATE OR REPLACE TEMP MACRO reasoning_unclosed(text) AS false")
        return
    open_tag, close_tag = (db.quote(tag) for tag in tags)
    closes = f"strpos(text, {close_tag})"
    before = f"substr(text, 1, {closes} - 1)"
    opened = f"starts_with(ltrim({before}, ' ' || {NEWLINE}), {open_tag})"
    reasoning = (f"CASE WHEN {opened} THEN substr(ltrim({before}, ' ' || {NEWLINE}), length({open_tag}) + 1) "
                 f"ELSE {before} END")
    con.execute(f"CREATE OR REPLACE TEMP MACRO content_of(text) AS CASE WHEN {closes} > 0 "
                f"THEN ltrim(substr(text, {closes} + length({close_tag})), {NEWLINE}) ELSE text END")
    con.execute(f"CREATE OR REPLACE TEMP MACRO reasoning_of(text) AS CASE WHEN {closes} > 0 "
                f"THEN trim({reasoning}, {NEWLINE}) END")
    con.execute(f"CREATE OR REPLACE TEMP MACRO reasoning_unclosed(text) AS "
                f"{closes} = 0 AND strpos(text, {open_tag}) > 0")
