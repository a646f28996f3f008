"""The package's imports flow one way. Read from every module's source (at its top and inside functions alike), they
draw no circle, and an import that leaves its room (a package, or a module at the package top) goes to a room on a
lower floor of docs/architecture.md's picture, or to an interface the picture names for that room. The picture's
rooms are the code's: a new package or top module is placed there before it can be imported."""

import ast
import math
import re
from pathlib import Path

import shardgen

PACKAGE = Path(shardgen.__file__).parent
ARCHITECTURE = PACKAGE.parents[1] / "docs" / "architecture.md"
TOP_MODULES_AT_MOST = 12


def modules() -> dict[str, Path]:
    """Dotted name -> file of every module of the package; a package is its __init__.py."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported(tree: ast.AST, known: dict[str, Path]) -> set[str]:
    """The package's modules a parsed file imports: `from a.b import c` is the module a.b.c where c is one, else
    a.b. A package's __init__ that Python runs on the way to its module is not an arrow of its own."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            inner = [f"{node.module}.{alias.name}" for alias in node.names]
            names |= {name for name in inner if name in known}
            if any(name not in known for name in inner):
                names.add(node.module)
    return {name for name in names if name in known}


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imported(ast.parse(path.read_text()), known) - {name} for name, path in known.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan's), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            part = []
            while not part or part[-1] != node:
                part.append(stack.pop())
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def room(module: str) -> str:
    """The room a module stands in, as the picture spells it: `config/`, `cli.py`, `__init__.py` (the root)."""
    parts = module.split(".")[1:]
    if not parts:
        return "__init__.py"
    return f"{parts[0]}/" if (PACKAGE / parts[0]).is_dir() else f"{parts[0]}.py"


def picture_table(header: str) -> list[list[str]]:
    """The rows of the markdown table in docs/architecture.md whose header row starts with `header`."""
    lines = ARCHITECTURE.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header} |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def floors() -> dict[str, int]:
    """Room -> its floor in the picture's `Floor` table."""
    return {name: int(row[0]) for row in picture_table("Floor") for name in re.findall(r"`([^`]+)`", row[1])}


def interfaces() -> dict[str, set[str]]:
    """Module -> the rooms beside or below it the picture lets import it (its `Interface` table)."""
    named = {}
    for row in picture_table("Interface"):
        for path in re.findall(r"`([^`]+)`", row[0]):
            parts = Path(path).with_suffix("").parts
            module = ".".join(("shardgen",) + (parts[:-1] if parts[-1] == "__init__" else parts))
            named[module] = set(re.findall(r"`([^`]+)`", row[1]))
    return named


def leaving_arrows() -> list[tuple[str, str]]:
    """Every import that leaves its room and does not go down a floor: each must be a named interface's. A room the
    picture leaves out stands on no floor: every import into or out of it is listed."""
    floor = floors()
    return [(source, target) for source, targets in import_graph().items() for target in sorted(targets)
            if room(source) != room(target)
            and floor.get(room(target), math.inf) >= floor.get(room(source), -math.inf)]


def test_no_import_circle():
    graph = import_graph()
    assert "shardgen.model.target" in graph["shardgen.config.loading"]  # an import inside a function is read too
    assert circles(graph) == []


def test_the_circle_search_finds_a_circle_through_three_modules():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert circles(graph) == [["a", "b", "c"]]


def test_every_import_is_absolute_so_the_graph_sees_it():
    relative = [f"{name}: line {node.lineno}" for name, path in modules().items()
                for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.ImportFrom) and node.level]
    assert relative == []


def test_the_pictures_rooms_are_the_packages_and_top_modules():
    in_code = {room(module) for module in modules()}
    listed = [name for row in picture_table("Floor") for name in re.findall(r"`([^`]+)`", row[1])]
    assert sorted(listed) == sorted(in_code)  # each once, none missing, none gone


def test_an_import_leaving_its_room_goes_down_or_to_an_interface_named_for_it():
    named = interfaces()
    beside_or_up = [f"{source} -> {target}" for source, target in leaving_arrows()
                    if room(source) not in named.get(target, set())]
    assert beside_or_up == []


def test_every_named_interface_is_still_taken_by_each_room_it_is_named_for():
    taken = {(target, room(source)) for source, target in leaving_arrows()}
    unused = [f"{module} from {name}" for module, rooms in interfaces().items() for name in sorted(rooms)
              if (module, name) not in taken]
    assert interfaces()  # the table is read
    assert unused == []


def test_the_package_top_holds_at_most_12_modules_and_every_package_says_what_it_owns():
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top) <= TOP_MODULES_AT_MOST, top
    silent = [path.parent.name for path in PACKAGE.glob("*/__init__.py") if not ast.get_docstring(
        ast.parse(path.read_text()))]
    assert silent == []
