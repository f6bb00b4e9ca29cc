"""No import circles in any package, function-level imports included (`if TYPE_CHECKING:` imports are not run and
left out), and no room of the analyzer imports back up into a room that uses it: what two sides both need lives
in a module below them both. Read from the source with ast, nothing imported."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
PACKAGES = (
    "contract/stepscope_contract",
    "storage/stepscope_storage",
    "cli/stepscope_cli",
    "operator/stepscope_operator",
    "sidecar/stepscope_sidecar",
    "sidecar/stepscope_hook",
    "analyzer_job/stepscope_analyzer",
    "localcluster/stepscope_local",
    "testing/stepscope_testing",
)


def modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        root = REPO / package
        for path in root.rglob("*.py"):
            parts = path.relative_to(root.parent).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the nodes inside `if TYPE_CHECKING:` blocks."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for child in node.body for n in ast.walk(child))
    return skipped


def _targets(node: ast.Import | ast.ImportFrom, package: str) -> Iterator[tuple[str, str | None]]:
    """(module, name imported from it or None) for each name of an import statement."""
    if isinstance(node, ast.Import):
        yield from ((a.name, None) for a in node.names)
        return
    if node.level:
        parts = package.split(".")
        base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    yield from ((base, a.name) for a in node.names)


def import_graph(known: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the project modules it imports anywhere in its code (a `from package import module` names the
    module, a `from module import name` the module)."""
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        skipped = _type_checking_only(tree)
        edges: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skipped or not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for module, imported in _targets(node, package):
                if imported is not None and f"{module}.{imported}" in known:
                    edges.add(f"{module}.{imported}")
                elif module in known:
                    edges.add(module)
        graph[name] = edges - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            child = next(edges, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
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


def rooms(graph: dict[str, set[str]], package: str) -> dict[str, set[str]]:
    """The package's subpackages (rooms) and which other rooms each imports (a room's own __init__ included)."""
    names = {m.split(".")[1] for m in graph if m.startswith(package + ".") and m.count(".") >= 2}

    def room(module: str) -> str | None:
        parts = module.split(".")
        return parts[1] if parts[0] == package and len(parts) >= 2 and parts[1] in names else None

    out: dict[str, set[str]] = {}
    for module, edges in graph.items():
        here = room(module)
        for target in edges:
            there = room(target)
            if here is not None and there is not None and there != here:
                out.setdefault(here, set()).add(there)
    return out


def test_the_checker_finds_a_function_level_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    tree = ast.parse("def f():\n    from pkg.b import g\n")
    assert [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]  # ast.walk reaches into functions
    assert rooms({"p.x.m": {"p.y.n"}, "p.y.n": {"p.x"}, "p.x": set(), "p.top": {"p.x.m"}}, "p") == {
        "x": {"y"},
        "y": {"x"},
    }


def test_no_package_has_an_import_circle() -> None:
    graph = import_graph(modules())
    assert len(graph) > 250  # every package was read
    assert cycles(graph) == []


def test_no_room_of_the_analyzer_imports_back_up() -> None:
    room_graph = rooms(import_graph(modules()), "stepscope_analyzer")
    assert {"commands", "ranks", "workers", "diff", "parse"} <= set(room_graph) | {
        r for rs in room_graph.values() for r in rs
    }
    assert cycles(room_graph) == []
