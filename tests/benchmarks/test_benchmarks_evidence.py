"""Every result file benchmarks/README.md cites is committed: a figure without its file is not evidence."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
CITED = re.compile(r"\bresults/[A-Za-z0-9._/-]+\.(?:json|yaml|txt|md|png|parquet|log)\b")


def cited(text: str) -> set[str]:
    return {"benchmarks/" + m.group(0) for m in CITED.finditer(text)}


def test_the_pattern_finds_cited_files():
    assert cited("see `results/2026-12-02-h200-tune/best.yaml` and results/status.json.") == {
        "benchmarks/results/2026-12-02-h200-tune/best.yaml", "benchmarks/results/status.json"}


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(), reason="needs the git checkout")
def test_every_results_file_the_benchmarks_readme_names_is_committed():
    tracked = set(subprocess.run(["git", "ls-files", "benchmarks/results"], cwd=REPO, capture_output=True, text=True,
                                 check=True).stdout.split())
    names = cited((REPO / "benchmarks" / "README.md").read_text())
    assert names, "the README cites no results file: the pattern is broken"
    assert not names - tracked, f"cited in benchmarks/README.md but not committed: {sorted(names - tracked)}"
