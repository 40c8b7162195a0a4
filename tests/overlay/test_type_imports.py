"""The overlayfs import picture has no circle even counting ``if TYPE_CHECKING:`` imports (#34: promotion
used to import the view that imports it, for a type; it takes a Protocol now). tests/test_layers.py checks
the imports that run; this one also counts those only a type checker follows."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_layers import cycles

ROOT = Path(__file__).resolve().parents[2]


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def typing_graph() -> dict[str, set[str]]:
    files = {_module(p): p for p in (ROOT / "overlayfs").rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                graph[mod] |= {a.name for a in node.names if a.name in files}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                subs = {f"{node.module}.{a.name}" for a in node.names} & files.keys()
                graph[mod] |= subs or ({node.module} & files.keys())
        graph[mod].discard(mod)
    return graph


def test_no_circle_through_type_checking_imports() -> None:
    graph = typing_graph()
    assert "overlayfs.promote" in graph["overlayfs.view"]  # the walk found the imports
    assert cycles(graph) == set()
