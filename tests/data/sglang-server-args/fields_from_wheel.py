"""Print the field names of SGLang's ServerArgs, read from a wheel's source with `ast` (nothing of it imported, so no
torch, no GPU), one a line under a header: the fixture tests/engines/test_sglang_versions.py checks shardgen's
server arguments against.

    pip download --no-deps sglang==0.5.23 -d /tmp/sgl
    cd tests/data/sglang-server-args && python fields_from_wheel.py /tmp/sgl/sglang-0.5.23-*.whl > 0.5.23.txt

Up to 0.5.17 ServerArgs is a dataclass in sglang/srt/server_args.py: its fields are the class body's annotated names.
From 0.5.18 or so it is a msgspec struct assembled from the namespace classes that server_args.py lists in
`_INPUT_NAMESPACES` (each imported from sglang/srt/arg_groups/fields/): its fields are their annotated names, plus
any of ServerArgs's own. msgspec keeps annotated names with a leading underscore as fields, so they are listed too;
a ClassVar is a field of neither."""

import ast
import hashlib
import sys
import zipfile
from pathlib import Path

SERVER_ARGS = "sglang/srt/server_args.py"


def _annotated_names(cls: ast.ClassDef) -> list[str]:
    names = []
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                and "ClassVar" not in ast.unparse(node.annotation):
            names.append(node.target.id)
    return names


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    if len(found) != 1:
        raise SystemExit(f"{len(found)} classes named {name} where one was expected")
    return found[0]


def _namespace_list(tree: ast.Module) -> list[str] | None:
    """The names in `_INPUT_NAMESPACES = [...]`, or None where server_args.py has no such list (a dataclass)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_INPUT_NAMESPACES"
                                                for t in node.targets):
            return [e.id for e in node.value.elts]  # type: ignore[attr-defined]
    return None


def _imported_from(tree: ast.Module) -> dict[str, str]:
    """Imported name -> the module it comes from, for `from sglang... import Name` lines."""
    return {alias.asname or alias.name: node.module for node in tree.body
            if isinstance(node, ast.ImportFrom) and node.module for alias in node.names}


def fields(wheel: zipfile.ZipFile) -> list[str]:
    tree = ast.parse(wheel.read(SERVER_ARGS))
    own = _annotated_names(_class(tree, "ServerArgs"))
    namespaces = _namespace_list(tree)
    if namespaces is None:
        return own
    sources = _imported_from(tree)
    names: list[str] = []
    for namespace in namespaces:
        module = sources[namespace]
        source = ast.parse(wheel.read(module.replace(".", "/") + ".py"))
        names += _annotated_names(_class(source, namespace))
    return names + [n for n in own if n not in names]


def main(path: str) -> None:
    wheel_path = Path(path)
    digest = hashlib.sha256(wheel_path.read_bytes()).hexdigest()
    with zipfile.ZipFile(wheel_path) as wheel:
        names = fields(wheel)
    if len(set(names)) != len(names):
        raise SystemExit("a field named twice: the reading of this wheel's layout is wrong")
    print(f"# ServerArgs field names of {wheel_path.name} (sha256 {digest}),")
    print("# read from its source by tests/data/sglang-server-args/fields_from_wheel.py; one a line, sorted.")
    print("\n".join(sorted(names)))


if __name__ == "__main__":
    main(*sys.argv[1:])
