"""Extras: what `pip install -e '.[test]'` brings must not slow every snakemake call."""

import re
import tomllib

from conftest import REPO


def extra_requirements(extras: dict, name: str) -> set[str]:
    """The requirement names an extra installs, following `shardgen[...]` self-references."""
    names = set()
    for requirement in extras[name]:
        if match := re.fullmatch(r"shardgen\[(.+)\]", requirement):
            for inner in match.group(1).split(","):
                names |= extra_requirements(extras, inner.strip())
        else:
            names.add(re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0])
    return names


def test_the_slurm_executor_plugin_is_only_in_the_slurm_extra():
    # snakemake imports every installed executor plugin when it starts; the Slurm one runs scontrol as it loads
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    plugin = "snakemake-executor-plugin-slurm"
    assert plugin not in extra_requirements(extras, "test") | extra_requirements(extras, "cpu")
    assert plugin in extra_requirements(extras, "slurm")
    assert "pip install -q -e '.[test,slurm]'" in (REPO / ".ci" / "run").read_text()


def test_a_skip_shows_its_reason_in_the_readmes_pytest_run(tmp_path):
    import subprocess
    import sys

    (tmp_path / "test_skips.py").write_text("import pytest\n\n\ndef test_x():\n"
                                            "    pytest.skip('needs a Slurm cluster')\n")
    out = subprocess.run([sys.executable, "-m", "pytest", "-c", str(REPO / "pyproject.toml"), "-p", "no:cacheprovider",
                          str(tmp_path / "test_skips.py")], capture_output=True, text=True, cwd=tmp_path).stdout
    assert "SKIPPED [1]" in out and "needs a Slurm cluster" in out
