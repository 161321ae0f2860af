"""The layers run one way, and no two files import each other in a circle.

Every module of the product is parsed with ``ast`` (nothing is imported), and each of its
imports (top-level, in functions and under ``TYPE_CHECKING`` alike) is checked against the
rules of ``docs/architecture.md``:

- ``engine`` and ``rag`` import nothing of ours;
- ``appliance.core`` imports only itself, ``engine`` and ``rag``;
- ``ui`` imports the core (and ``engine``/``rag``), never an edge;
- ``appliance.wiring`` is the only code that imports ``ui``;
- the HTTP layer (``appliance.api``) imports no other edge.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.paths import REPO

PACKAGES = ("appliance", "engine", "rag", "ui", "installer")

# importer prefix -> the prefixes of ours it may import (the first matching prefix applies)
ALLOWED: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("engine", ("engine",)),
    ("rag", ("rag",)),
    ("appliance.core", ("appliance.core", "engine", "rag")),
    ("ui", ("ui", "appliance.core", "engine", "rag")),
    ("appliance.api", ("appliance.api", "appliance.core", "engine", "rag")),
    (
        "appliance.wiring",
        ("appliance.wiring", "appliance.api", "appliance.core", "ui", "engine", "rag"),
    ),
    ("appliance.ops", ("appliance.ops", "appliance.wiring", "appliance.core", "engine", "rag")),
    ("appliance.bench", ("appliance.bench", "appliance.wiring", "appliance.core", "engine", "rag")),
    (
        "appliance.cli",
        (
            "appliance.cli",
            "appliance.ops",
            "appliance.bench",
            "appliance.wiring",
            "appliance.core",
            "engine",
            "rag",
        ),
    ),
    ("installer", ("installer", "appliance.wiring", "appliance.core", "engine", "rag")),
    ("appliance", ("appliance",)),  # the package's own __init__
)


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def module_files() -> dict[str, Path]:
    """Every product module by dotted name (migration scripts excluded: alembic loads them)."""
    out = {}
    for pkg in PACKAGES:
        for path in sorted((REPO / pkg).rglob("*.py")):
            rel = path.relative_to(REPO).with_suffix("")
            if "migrations" in rel.parts and "versions" in rel.parts:
                continue
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> Iterator[tuple[int, str]]:
    """(line, module of ours) for each import in the file; ``from X import Y`` names the
    module ``X.Y`` where that is a module, else ``X``."""
    is_pkg = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                anchor = name.split(".")
                anchor = anchor if is_pkg else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield node.lineno, full if full in modules else base


def _ours(target: str) -> bool:
    return any(_under(target, p) for p in PACKAGES)


def _owner(target: str, modules: dict[str, Path]) -> str | None:
    """The longest module of ours that ``target`` names (``a.b.C`` -> ``a.b``)."""
    parts = target.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in modules:
            return ".".join(parts[:n])
    return None


@pytest.fixture(scope="module")
def graph() -> dict[str, list[tuple[int, str]]]:
    modules = module_files()
    return {
        name: [(line, t) for line, t in imports_of(name, path, modules) if _ours(t)]
        for name, path in modules.items()
    }


def test_every_package_is_read(graph: dict[str, list[tuple[int, str]]]) -> None:
    for pkg in PACKAGES:
        assert sum(_under(m, pkg) for m in graph) >= 5, pkg
    assert sum(len(v) for v in graph.values()) > 300  # the imports really are parsed


def test_layers_run_one_way(graph: dict[str, list[tuple[int, str]]]) -> None:
    modules = module_files()
    bad = []
    for name, targets in graph.items():
        allowed = next(ok for prefix, ok in ALLOWED if _under(name, prefix))
        for line, target in targets:
            if not any(_under(target, p) for p in allowed):
                rel = modules[name].relative_to(REPO)
                bad.append(f"{rel}:{line} imports {target}")
    assert not bad, "imports against the layering rules:\n" + "\n".join(bad)


def test_no_circle_of_files(graph: dict[str, list[tuple[int, str]]]) -> None:
    modules = module_files()
    edges: dict[str, set[str]] = {m: set() for m in graph}
    for name, targets in graph.items():
        for _line, target in targets:
            owner = _owner(target, modules)
            if owner and owner != name:
                edges[name].add(owner)
    circles = [c for c in _strongly_connected(edges) if len(c) > 1]
    shown = ["  " + " -> ".join(sorted(c)) for c in circles]
    assert not circles, "files that import each other in a circle:\n" + "\n".join(shown)


def _strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
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
                out.append(component)
    return out


def test_the_checks_catch_a_circle_and_a_layer_breach() -> None:
    """The detector itself: a two-file circle is found, and a core import of ui is refused."""
    assert sorted(map(sorted, _strongly_connected({"a": {"b"}, "b": {"a"}, "c": {"a"}}))) == [
        ["a", "b"],
        ["c"],
    ]
    allowed = next(ok for prefix, ok in ALLOWED if _under("appliance.core.services.chat", prefix))
    assert not any(_under("ui.chat_page", p) for p in allowed)
