"""Layout is the one place a path under results/ is spelled: a file name, folder or pattern of the results tree
written anywhere else in the package or the rules is a second spelling that drifts (a renamed file the report still
looks for under its old name). Docstrings and comments may name the files; code may not."""

import io
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "workflow" / "shardgen"
LAYOUT = PACKAGE / "layout"  # the package: every file in it may spell a path
# Pieces of the names Layout gives (a part, a done file, the prompt tables, the report, tune's fragment, the state
# folder, the shard folders): a string literal holding one spells a results path.
RESULTS_NAMES = ("done.json", "part-", "telemetry-", "shard-", "parts-index", "status-cache", "prompts.parquet",
                 "rejected.parquet", "duplicates.parquet", "failed.parquet", "data.parquet", "train.jsonl",
                 "summary.json", "manifest.json", "report.md", "best.yaml", "tune.json", ".png", "/generate/",
                 ".shardgen")
FOLDER_NAMES = ("figures",)  # a literal that is exactly a folder of the tree
# Literals that hold such a piece and are no results path, each with what it is.
NOT_RESULTS = {
    'f"shard-{key}.lock"': "a shard writer's node-local lock file, in the temp folder (generate/checkpoint.py)",
    '"../report/figures.rst"': "the report's caption, beside the rules (workflow/report/)",
}


def code_strings(path: Path) -> list[tuple[int, str]]:
    """(line, literal) of every string literal of the file's code: not its comments, not a string standing alone as
    a statement (a docstring). A rule file tokenizes as Python does."""
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
              if t.type not in (tokenize.COMMENT, tokenize.NL)]
    found = []
    for i, token in enumerate(tokens):
        if token.type != tokenize.STRING:
            continue
        before = tokens[i - 1].type if i else tokenize.NEWLINE
        after = tokens[i + 1].type if i + 1 < len(tokens) else tokenize.NEWLINE
        standalone = before in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT) and after == tokenize.NEWLINE
        if not standalone:
            found.append((token.start[0], token.string))
    return found


def spelled_paths(files: list[Path]) -> list[str]:
    return [f"{path.relative_to(REPO)}:{line}: {literal}  (ask Layout)"
            for path in files for line, literal in code_strings(path)
            if literal not in NOT_RESULTS and (any(name in literal for name in RESULTS_NAMES)
                                               or literal.strip("'\"") in FOLDER_NAMES)]


def checked_files() -> list[Path]:
    return sorted(path for path in {*PACKAGE.rglob("*.py"), *(REPO / "workflow" / "rules").glob("*.smk"),
                                    REPO / "Snakefile"} if LAYOUT not in path.parents)


def test_no_results_path_is_spelled_outside_layout():
    spelled = spelled_paths(checked_files())
    assert not spelled, "results paths spelled outside shardgen/layout/:\n" + "\n".join(spelled)


def test_the_check_sees_a_spelled_path_and_skips_docstrings_and_comments(tmp_path):
    module = tmp_path / "module.py"
    module.write_text('"""Writes summary.json."""\n# and report.md\n\ndef write(out):\n'
                      '    """Into out/summary.json."""\n    return out / "summary.json"\n')
    assert [line for line, _ in code_strings(module) if "summary.json" in _] == [6]
    checked = checked_files()
    assert len(checked) > 50 and not any(LAYOUT in path.parents for path in checked)
