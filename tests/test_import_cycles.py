"""No import cycle inside ``course_lib``: the modules' import graph, read from their source, is a DAG.

Every ``import`` counts, also those inside functions (a cycle hidden in a function is still two modules
that cannot be read, or changed, one without the other). ``from pkg import name`` is an arrow to the
submodule ``pkg.name`` when there is one, else to ``pkg`` itself (its ``__init__``); importing a
submodule does not count as importing the package that holds it.
"""
from __future__ import annotations

import ast
from pathlib import Path

import course_lib

PKG = Path(course_lib.__file__).resolve().parent

# Cycles known today, with who removes them; the list only shrinks (a listed cycle that is gone fails
# the test too, so the entry is deleted with the fix).
KNOWN_CYCLES: dict[tuple[str, ...], str] = {}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def import_graph() -> dict[str, dict[str, int]]:
    """module → {imported module: line of the first import} for every module of course_lib."""
    modules = _modules()
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in modules else mod for a in node.names]
            for t in targets:
                if t in modules and t != name:
                    edges.setdefault(t, node.lineno)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each as a list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}, "d": {"a": 4}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b": 1}, "b": {}}) == []


def test_no_import_cycle_inside_course_lib():
    graph = import_graph()
    assert len(graph) > 50                      # the whole package was read
    found = [c for c in cycles(graph) if tuple(c) not in KNOWN_CYCLES]
    gone = [c for c in KNOWN_CYCLES if list(c) not in cycles(graph)]
    assert not gone, f"these known cycles are gone: delete them from KNOWN_CYCLES: {gone}"
    lines = []
    for comp in found:
        for a in comp:
            for b, line in graph[a].items():
                if b in comp:
                    lines.append(f"  {graph_path(a)}:{line} imports {b}")
    assert not found, "import cycles inside course_lib:\n" + "\n".join(lines)


def graph_path(module: str) -> str:
    return str(_modules()[module].relative_to(PKG.parent))
