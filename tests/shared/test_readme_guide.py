"""The README is a user's guide: lines a reader can see whole, every command findable with an example, links that
lead somewhere, no project history."""

import re

from shardgen.cli import COMMANDS

from conftest import REPO

README = (REPO / "README.md").read_text()
# The Quick start's test set-up runs as one line: CI (.ci/run) and users copy it whole.
ONE_LINE_COMMANDS = ("pip install -e '.[test]' && pip install --no-deps specforge==0.2.0 speculators==0.9.0 "
                     "fschat==0.2.36 && ruff check && mypy && pytest",)


def _section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end >= 0 else len(README)]


def test_no_line_is_longer_than_120_characters_outside_tables():
    long = [line for line in README.splitlines()
            if len(line) > 120 and not line.startswith("|") and not line.startswith(ONE_LINE_COMMANDS)]
    assert long == []
    assert all(any(line.startswith(command) for line in README.splitlines()) for command in ONE_LINE_COMMANDS)


def test_every_command_has_an_example_in_the_commands_section():
    commands = _section("Commands")
    examples = {name for name in COMMANDS
                if re.search(rf"^shardgen (--config \S+ )?{re.escape(name)}(\s|$)", commands, re.MULTILINE)}
    assert sorted(set(COMMANDS) - examples) == []


def test_every_linked_docs_page_exists():
    linked = set(re.findall(r"\]\((docs/[^)#]+\.md)(?:#[^)]*)?\)", README))
    assert "docs/trainers.md" in linked and "docs/performance.md" in linked
    assert sorted(path for path in linked if not (REPO / path).is_file()) == []


def test_the_links_into_docs_pages_name_headings_that_exist():
    anchors = set()
    for path, anchor in re.findall(r"\]\(((?:docs/)?[\w-]+\.md)#([^)]+)\)", README):
        anchors.add(("docs/" + path.removeprefix("docs/"), anchor))
    for page in (REPO / "docs").glob("*.md"):
        for path, anchor in re.findall(r"\]\(([\w-]+\.md)#([^)]+)\)", page.read_text()):
            anchors.add(("docs/" + path, anchor))
    assert anchors, "no link into a docs heading: the pattern is broken"
    missing = sorted(f"{path}#{anchor}" for path, anchor in anchors if anchor not in _slugs(REPO / path))
    assert missing == []


def _slugs(page) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def test_no_issue_numbers_or_history_in_the_readme():
    assert re.findall(r"(?i)\bissues? #?\d+", README) == []
    assert re.findall(r"(?i)\b(until now|formerly|used to)\b|\bbefore, ", README) == []
