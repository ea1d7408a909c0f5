"""agefast's modules form layers: no module imports, even for type checking only, one that imports it back."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "agefast"


def _module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """{module: the agefast modules it names in any import statement}, read from the source, nothing run.

    Every import counts, those inside functions (made lazily) and under
    TYPE_CHECKING too: each is a dependency of the importing module, and a
    cycle of them is a layer that knows the one above it.
    """
    paths = {_module_name(p, package): p for p in package.rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        is_package = path.name == "__init__.py"
        named = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                named.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".")[:None if is_package else -1]
                    base = base[:len(base) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                # `from a import b` names the module a.b where there is one, else a
                named.update(f"{module}.{alias.name}" if f"{module}.{alias.name}" in paths else module
                             for alias in node.names)
        graph[name] = {m for m in named if m in paths and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_no_import_cycle():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_sees_cycles_of_every_kind(tmp_path):
    # A cycle through a lazy import, one through TYPE_CHECKING and relative
    # imports, and a module that only imports others: the finder must report
    # the first two and not the third.
    package = tmp_path / "agefast"
    (package / "sub").mkdir(parents=True)
    sources = {
        "__init__.py": "",
        "a.py": "def f():\n    import agefast.b\n",
        "b.py": "from agefast import a\n",
        "sub/__init__.py": "",
        "sub/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .d import D\n",
        "sub/d.py": "from ..sub import c\n",
        "e.py": "from . import a, b\nfrom .sub import c, d\n",
    }
    for name, text in sources.items():
        (package / name).write_text(text)
    assert sorted(cycles(import_graph(package))) == [["agefast.a", "agefast.b"], ["agefast.sub.c", "agefast.sub.d"]]
