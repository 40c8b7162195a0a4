"""The backend registries are the one place that knows backend names: no module of ``speculate``,
``overlayfs`` or ``bench`` outside them compares a value with an overlay backend's name (``overlayfs.backends``) or a
model backend's (``speculate.backends``); they ask the registry and the backend object instead.

What is caught: ``==``, ``!=``, ``in`` and ``not in`` with a name as a string literal (alone or in a literal
tuple, list or set) on either side, and a ``case "name":`` pattern. A name smuggled in another way (a dict
keyed by names, a name built at run time) is not: this guards against the easy relapse, not every one."""

from __future__ import annotations

import ast
from collections.abc import Collection
from pathlib import Path

from overlayfs import backends as overlay_backends
from speculate import backends as model_backends

REPO = Path(__file__).resolve().parents[1]
REGISTRIES = {REPO / "overlayfs" / "backends.py", REPO / "speculate" / "backends.py"}
NAMES = set(overlay_backends.REGISTRY) | set(model_backends.MODEL_BACKENDS)


def _literals(node: ast.expr) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def name_comparisons(root: Path, names: set[str], skip: Collection[Path] = ()) -> list[str]:
    """``file:line: source`` of every comparison with one of ``names`` under ``root``'s packages."""
    found = []
    for path in sorted(p for pkg in ("speculate", "overlayfs", "bench") for p in (root / pkg).rglob("*.py")):
        if path in skip or "workspaces" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            hit: set[str] = set()
            if isinstance(node, ast.Compare):
                for op, right in zip(node.ops, node.comparators, strict=True):
                    if isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
                        hit |= (_literals(node.left) | _literals(right)) & names
            elif isinstance(node, ast.MatchValue):
                hit = _literals(node.value) & names
            if hit:
                found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_outside_the_registries_compares_backend_names() -> None:
    assert name_comparisons(REPO, NAMES, REGISTRIES) == []


def test_the_scan_finds_a_comparison(tmp_path: Path) -> None:
    (tmp_path / "overlayfs").mkdir()
    (tmp_path / "speculate").mkdir()
    (tmp_path / "overlayfs" / "chooser.py").write_text(
        'def pick(b):\n    if b == "kernel":\n        return 1\n    if b in ("fuse", "x"):\n        return 2\n'
        '    match b:\n        case "fuse-overlayfs":\n            return 3\n'
    )
    (tmp_path / "speculate" / "model.py").write_text(
        'def sim(cfg):\n    return "claude-cli" != cfg.backend\n'
    )
    assert [f.split(": ")[0] for f in name_comparisons(tmp_path, NAMES)] == [
        "overlayfs/chooser.py:2",
        "overlayfs/chooser.py:4",
        "overlayfs/chooser.py:7",
        "speculate/model.py:2",
    ]


def test_the_registries_are_where_the_names_come_from() -> None:
    assert overlay_backends.BACKENDS == tuple(overlay_backends.REGISTRY)
    assert set(overlay_backends.MOUNTABLE) == {n for n, b in overlay_backends.REGISTRY.items() if b.mountable}
    assert set(overlay_backends.AUTO_ORDER) <= set(overlay_backends.MOUNTABLE)
    for name, b in overlay_backends.REGISTRY.items():
        assert b.name == name and overlay_backends.get(name) is b
    for name, m in model_backends.MODEL_BACKENDS.items():
        assert m.name == name
