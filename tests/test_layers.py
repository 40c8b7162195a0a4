"""The import picture of ``speculate``, ``overlayfs`` and ``bench`` has no circles and no arrow back up.

The graph is read from the source (``ast``), not from ``sys.modules``, so an import hidden in a function
(a deferred import) counts as much as one at the top of a module. ``if TYPE_CHECKING:`` blocks never run,
so they make no runtime circle; but a type-level circle or an arrow back up is the same knot for a reader
and for mypy, so the "typed" picture counts them too, and it must have no circle and no arrow up either. ``from pkg import name`` is an arrow to ``pkg`` itself when ``pkg/__init__.py``
binds ``name`` (a class, a function, a re-export: it needs the package's ``__init__`` to have run that far),
and to the submodule ``pkg.name`` when there is one: importing a submodule that way works even while
``pkg/__init__.py`` is still running, as ``from pkg.name import x`` does, so it is not an arrow to ``pkg``
(a package ``__init__`` may re-export its submodules' names, as long as they import each other, not it).
Module names in strings (``speculate/cli.py``'s subcommand table) are configuration, not
imports. See docs/architecture.md, "Layers".
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("speculate", "overlayfs", "bench")

# Circles that could not be broken yet, each with why; a circle found that is not here fails the test,
# and so does one listed here that is gone (the list only shrinks).
ALLOWED_CYCLES: dict[str, frozenset[frozenset[str]]] = {
    "top": frozenset(),
    "deferred": frozenset(),
    "typed": frozenset(),
}

# Which package may import which: overlayfs is the bottom (no speculate, no bench), speculate sits on it,
# bench (the experiments) on both.
BELOW = {
    "overlayfs": {"overlayfs"},
    "speculate": {"speculate", "overlayfs"},
    "bench": {"bench", "speculate", "overlayfs"},
}
# The layers of docs/architecture.md, bottom up: a module imports from its own layer and those below it. A
# module is in the layer of the longest prefix naming it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("overlayfs", ("overlayfs",)),
    (
        "base",
        (
            "speculate",
            "speculate.types",
            "speculate.errors",
            "speculate.term",
            "speculate.tempfiles",
            "speculate.nesting",
            "speculate.statistics",
            "speculate.cliparse",
            "speculate.transcript",
            "speculate.prompts",
            "speculate.instruction_imports",
            "speculate.instruction_markdown",
            "speculate.sensitive",
        ),
    ),
    ("tools", ("speculate.tools", "speculate.fs", "speculate.shell")),
    (
        "loop",
        (
            "speculate.agent",
            "speculate.agent_calls",
            "speculate.workspace",
            "speculate.hooks",
            "speculate.settings",
            "speculate.settings_modes",
            "speculate.trust",
            "speculate.permissions",
            "speculate.compaction",
            "speculate.agent_types",
            "speculate.instructions",
            "speculate.instruction_rules",
            "speculate.instruction_nested",
            "speculate.models",
            "speculate.sim",
            "speculate.mcp",
            "speculate.permission_rules",
            "speculate.permission_bash",
            "speculate.importers",
            "speculate.backends",
        ),
    ),
    ("engine", ("speculate.speculation", "speculate.session_types")),
    (
        "session",
        ("speculate.session", "speculate.session_compaction", "speculate.session_turn", "speculate.study"),
    ),
    ("drivers", ("bench", "speculate.repl")),
    ("wiring", ("speculate.cli", "speculate.repl.main", "bench.cli")),
)
# The wiring: the command tree and the entry points it names, which nothing imports; and the session, which
# assembles the agent, the engine and the workspace, imported only by what drives it (the REPL, the bench).
WIRING = ("speculate.cli", "speculate.repl.main", "bench.cli")
DRIVERS = ("speculate.repl.", "bench.")


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            rel = path.relative_to(ROOT)
            if "workspaces" in rel.parts or "scenarios" in rel.parts:
                continue  # a scenario's sample project is the user's code, copied and run, not ours
            name = ".".join(rel.with_suffix("").parts)
            mods[name.removesuffix(".__init__")] = path
    return mods


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


@functools.cache
def _bound(path: Path) -> set[str]:
    """The names a module binds at its top level (what ``from module import name`` can find there)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).partition(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def _imports(
    path: Path, name: str, mods: dict[str, Path], *, deferred: bool, typed: bool = False
) -> set[str]:
    """The project's modules ``name`` imports (at the top, or anywhere with ``deferred``; with ``typed``,
    inside ``if TYPE_CHECKING:`` too)."""
    is_package = path.name == "__init__.py"

    def known(module: str) -> str | None:
        while module and module not in mods:
            module = module.rpartition(".")[0]
        return module or None

    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and _is_type_checking(node):
                visit([*node.body, *node.orelse] if typed else node.orelse)
                continue
            if isinstance(node, ast.Import):
                targets = [known(a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = name.split(".") if is_package else name.split(".")[:-1]
                    parts = parts[: len(parts) - (node.level - 1)]
                    base = ".".join([*parts, base] if base else parts)
                targets = []
                for a in node.names:
                    if f"{base}.{a.name}" in mods:
                        targets.append(f"{base}.{a.name}")
                    if f"{base}.{a.name}" not in mods or (base in mods and a.name in _bound(mods[base])):
                        targets.append(known(base))
            else:
                if deferred or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    for child in ast.iter_child_nodes(node):
                        if isinstance(child, ast.stmt):
                            visit([child])
                continue
            found.update(t for t in targets if t and t != name)

    visit(ast.parse(path.read_text(), str(path)).body)
    return found


def import_graph(*, deferred: bool, typed: bool = False) -> dict[str, set[str]]:
    mods = _modules()
    return {name: _imports(path, name, mods, deferred=deferred, typed=typed) for name, path in mods.items()}


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, edges = work[-1]
            for w in edges:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = set()
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.add(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        found.add(frozenset(component))
    return found


@pytest.mark.parametrize("mode", ["top", "deferred", "typed"])
def test_the_import_picture_has_no_circles(mode: str) -> None:
    graph = import_graph(deferred=mode != "top", typed=mode == "typed")
    assert len(graph) > 100 and "speculate.session" in graph  # the walk found the packages
    found = cycles(graph)
    assert {c for c in found if c not in ALLOWED_CYCLES[mode]} == set(), "new import circles"
    assert ALLOWED_CYCLES[mode] - found == set(), "an allowed circle is gone: take it off the list"


def test_no_package_imports_one_above_it() -> None:
    graph = import_graph(deferred=True, typed=True)
    up = sorted(
        f"{m} -> {t}"
        for m, targets in graph.items()
        for t in targets
        if t.partition(".")[0] not in BELOW[m.partition(".")[0]]
    )
    assert up == []


def _layer(module: str) -> int:
    found = [
        (len(p), i)
        for i, (_, prefixes) in enumerate(LAYERS)
        for p in prefixes
        if module == p or module.startswith(p + ".")
    ]
    assert found, f"{module} is in no layer: add it to LAYERS and to docs/architecture.md"
    return max(found)[1]


def test_no_module_imports_one_of_a_layer_above_it() -> None:
    graph = import_graph(deferred=True, typed=True)
    up = sorted(
        f"{m} ({LAYERS[_layer(m)][0]}) -> {t} ({LAYERS[_layer(t)][0]})"
        for m, targets in graph.items()
        for t in targets
        if _layer(t) > _layer(m)
    )
    assert up == []


def test_the_wiring_is_on_top() -> None:
    graph = import_graph(deferred=True)
    assert all(w in graph for w in WIRING)
    importers = {w: sorted(m for m, targets in graph.items() if w in targets) for w in WIRING}
    assert importers == {w: [] for w in WIRING}
    of_session = [m for m, targets in graph.items() if "speculate.session" in targets]
    assert of_session and [m for m in of_session if not m.startswith(DRIVERS)] == []


def test_the_graph_sees_deferred_imports_and_type_checking_ones_only_when_typed(tmp_path: Path) -> None:
    """The reader itself: a deferred import always counts, a TYPE_CHECKING one only in the typed picture."""
    source = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from speculate import b\n"
        "def f():\n    from speculate.c import x\n"
    )
    path, init = tmp_path / "a.py", tmp_path / "__init__.py"
    path.write_text(source)
    init.write_text("from speculate.e import e\n")
    mods = {
        "speculate": init,
        "speculate.a": path,
        "speculate.b": path,
        "speculate.c": path,
        "speculate.d": path,
        "speculate.e": path,
    }
    assert _imports(path, "speculate.a", mods, deferred=False) == set()
    assert _imports(path, "speculate.a", mods, deferred=True) == {"speculate.c"}
    assert _imports(path, "speculate.a", mods, deferred=True, typed=True) == {"speculate.b", "speculate.c"}
    # a submodule by name is that module; a name the package's __init__ binds (even one that is also a
    # submodule's name) is the package
    path.write_text("from speculate import d, e\n")
    assert _imports(path, "speculate.a", mods, deferred=False) == {"speculate.d", "speculate.e", "speculate"}
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {frozenset("abc")}
