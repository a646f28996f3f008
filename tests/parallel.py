"""The suite on several pytest-xdist workers (pyproject: -n 3): tests are handed out one at a time, except that the
tests of a module sharing a module-scoped fixture go to one worker, which builds it once; a folder built once per
session is shared by all workers (built_once); the tests marked `slow` are handed out first, so that the last
minutes are not one whole-workflow run on one worker while the others idle. tests/conftest.py takes the hooks and
fixtures from here."""

import fcntl
import json
import os
import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest

SHARED_MODULES = "modules-sharing-a-fixture.json"  # written by the workers as they collect, read by the scheduler


@contextmanager
def flocked(path: Path):
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def session_root(tmp_path_factory) -> Path:
    """The folder of this test session: under pytest-xdist, the one its workers share (each has a folder in it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(tmp_path_factory, name: str, build) -> Path:
    """The folder `build(folder)` fills, made once per test session, by whichever worker asks first while the
    others wait on its lock. The tests only read it: one that changes it works on a copy."""
    root = session_root(tmp_path_factory)
    with flocked(root / f"{name}.lock"):
        if not (root / f"{name}.built").exists():  # a build that failed left no mark: the next test tries again
            shutil.rmtree(root / name, ignore_errors=True)
            build(root / name)
            (root / f"{name}.built").touch()
    return root / name


def shares_a_module_fixture(item) -> bool:
    fixtures = getattr(item, "_fixtureinfo", None)
    return bool(fixtures) and any(defs[-1].scope == "module" for defs in fixtures.name2fixturedefs.values())


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Tests marked `slow` first (--no-loadscope-reorder keeps this order): the longest work starts while there is
    short work left to fill the other workers around it. A worker writes down the modules whose tests share a
    module-scoped fixture (every worker collects the same tests) for the scheduler."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    if worker := os.environ.get("PYTEST_XDIST_WORKER"):
        path = session_root(config._tmp_path_factory) / SHARED_MODULES
        modules = sorted({item.nodeid.split("::")[0] for item in items if shares_a_module_fixture(item)})
        (path.parent / f"{path.name}.{worker}").write_text(json.dumps(modules))
        os.replace(path.parent / f"{path.name}.{worker}", path)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's LoadScopeScheduling with a test as the unit of work, or a module where its tests share a
    module-scoped fixture. (xdist's loadgroup would group by mark, but it renames the tests to do so, which pytest 9
    ignores.) The scheduler asks for units once every worker has collected, so the list is written by then."""
    from xdist.scheduler import LoadScopeScheduling

    shared: list[str] = []

    class ByTestOrSharedModule(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if not shared:
                shared.extend(json.loads((config._tmp_path_factory.getbasetemp() / SHARED_MODULES).read_text()))
            module = nodeid.split("::")[0]
            return module if module in shared else nodeid

    return ByTestOrSharedModule(config, log)


@pytest.fixture(scope="session", autouse=True)
def own_gpu_locks(tmp_path_factory):
    """Each session (each xdist worker) leases the fake GPUs from its own lock folder, so tests running side by
    side never wait on each other's GPU 0; a test that names its own folder still wins."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SHARDGEN_GPU_LOCK_DIR", os.environ.get("SHARDGEN_GPU_LOCK_DIR")
                     or str(tmp_path_factory.mktemp("gpu-locks")))
        yield
