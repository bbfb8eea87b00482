"""No import circle in sessions/, supervisor/ or tui/, every import counted, read from source.

import-linter's contracts keep the wings pointing one way, but they do not see a circle inside a
wing, and a function-local or `if TYPE_CHECKING:` import is still a dependency a reader has to
hold in mind. This test reads every module's imports with `ast` (top-level, function-local and
type-checking alike) and fails naming each circle it finds.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {
    "sessions": "agentherd.sessions",
    "supervisor": "agentherd.supervisor",
    "tui": "agentherd.tui",
}


def module_files() -> dict[str, Path]:
    """Every module of the three packages by its dotted name."""
    found = {}
    for folder, package in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def imported_names(path: Path, module: str) -> Iterator[str]:
    """Dotted names `module` imports anywhere in its source (relative imports resolved)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = f"{anchor}.{base}" if base else anchor
            # `from P import n` depends on P.n when that is a module, else on P (resolved later).
            yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph() -> dict[str, set[str]]:
    """module -> the modules of ours it imports (a name resolves to its longest module prefix)."""
    modules = module_files()

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for module, path in modules.items():
        targets = {owner(name) for name in imported_names(path, module)}
        graph[module] = {t for t in targets if t and t != module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
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


def test_the_circle_finder_finds_a_circle_through_a_function_local_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_imports_are_read_from_every_place_in_a_module(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from agentherd.tui import x\n"
        "def f():\n    from . import y\n    import agentherd.sessions.z\n"
    )
    names = set(imported_names(source, "agentherd.supervisor.m"))
    assert names == {
        "typing.TYPE_CHECKING",
        "agentherd.tui.x",
        "agentherd.supervisor.y",
        "agentherd.sessions.z",
    }


def test_no_import_circle_in_sessions_supervisor_or_tui() -> None:
    graph = import_graph()
    assert len(graph) > 150  # the packages were found
    found = circles(graph)
    assert not found, "import circles (every import counted):\n" + "\n".join(
        " <-> ".join(name.removeprefix("agentherd.") for name in circle) for circle in found
    )
