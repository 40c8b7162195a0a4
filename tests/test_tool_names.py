"""The tool registry (:mod:`speculate.tools.registry`) is the one place that knows tool names: no module of
``speculate`` or ``overlayfs`` outside it compares a value with a tool's name; they ask the registry's sets
(derived from what each tool declares) or the tool object, as tests/test_backend_names.py holds the backend
registries to.

What is caught: ``==``, ``!=``, ``in`` and ``not in`` with a name as a string literal (alone or in a literal
tuple, list or set) on either side, a ``case "name":`` pattern, and a ``.startswith("Name(")`` of a rule's
text. A name smuggled in another way (a dict keyed by names, a name built at run time) is not: this guards
against the easy relapse, not every one."""

from __future__ import annotations

import ast
from collections.abc import Collection
from pathlib import Path

from speculate.tools import default_tools, registry
from tests.test_backend_names import _literals  # the same reading of string literals

REPO = Path(__file__).resolve().parents[1]
REGISTRY = REPO / "speculate" / "tools" / "registry.py"
NAMES = set(registry.NAMES) | set(registry.CLAUDE_CODE_ONLY)

# Modules that may compare tool names, each with why. The list only shrinks.
EXCEPTIONS: dict[str, str] = {
    # Claude Code's transcripts are another program's records: the importer reads what its Read, Edit and
    # Write calls did to rebuild the project's files as they were (whatever speculate's tools are).
    "speculate/importers/tree.py": "reads Claude Code's recorded Read/Edit/Write calls",
    "speculate/importers/claude_code.py": "reads Claude Code's recorded Edit calls",
    "speculate/importers/checks.py": "checks recorded results against Claude Code's tools' texts",
}


def name_comparisons(root: Path, names: set[str], skip: Collection[Path] = ()) -> list[str]:
    """``file:line: source`` of every comparison with one of ``names`` under ``root``'s two packages."""
    found = []
    for path in sorted([*(root / "speculate").rglob("*.py"), *(root / "overlayfs").rglob("*.py")]):
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
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "startswith"
                and node.args
            ):
                hit = {n for n in names for s in _literals(node.args[0]) if s.startswith(n + "(")}
            if hit:
                found.append(f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}: {ast.unparse(node)}")
    return found


def test_no_module_outside_the_registry_compares_tool_names() -> None:
    skip = {REGISTRY, *(REPO / p for p in EXCEPTIONS)}
    assert name_comparisons(REPO, NAMES, skip) == []


# Modules that keep a literal collection of two or more tool names (a hand-kept set is how a new tool gets
# forgotten), each with why it is not derived from the registry. The list only shrinks.
COLLECTIONS: dict[str, str] = {
    "speculate/instruction_nested.py": "the tools Claude Code 2.1.332 was observed loading nested CLAUDE.md "
    "for (Read, Edit, Write; not Glob or Grep): an observation, not a capability to derive",
    "speculate/sim/intents.py": "the simulator's vocabulary: which of speculate's tools serves which intent, "
    "mapped onto other clients' tool names",
    "speculate/importers/render.py": "how Claude Code's recorded inputs differ from speculate's, per tool",
    "speculate/importers/checks.py": "checks recorded results against Claude Code's tools' texts",
}


def name_collections(root: Path, names: set[str], skip: Collection[Path] = ()) -> list[str]:
    """``file:line: names`` of every literal set, tuple, list or dict keys with two or more of ``names``."""
    found = []
    for path in sorted([*(root / "speculate").rglob("*.py"), *(root / "overlayfs").rglob("*.py")]):
        if path in skip or "workspaces" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            elts: list[ast.expr | None] = []
            if isinstance(node, (ast.Set, ast.Tuple, ast.List)):
                elts = list(node.elts)
            elif isinstance(node, ast.Dict):
                elts = list(node.keys)
            hit = {e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)} & names
            if len(hit) >= 2:
                found.append(f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}: {sorted(hit)}")
    return found


def test_no_module_outside_the_registry_keeps_a_set_of_tool_names() -> None:
    skip = {REGISTRY, *(REPO / p for p in COLLECTIONS)}
    assert name_collections(REPO, NAMES, skip) == []
    for rel in COLLECTIONS:  # an exception that no longer keeps one is dropped from the list
        assert name_collections(REPO, NAMES, _all(REPO) - {REPO / rel}), rel


def test_the_exceptions_still_compare_names() -> None:
    """An exception that no longer compares a name is dropped from the list."""
    for rel in EXCEPTIONS:
        assert name_comparisons(REPO, NAMES, {p for p in _all(REPO) if p != REPO / rel}), rel


def _all(root: Path) -> set[Path]:
    return {*(root / "speculate").rglob("*.py"), *(root / "overlayfs").rglob("*.py")}


def test_the_scan_finds_a_comparison(tmp_path: Path) -> None:
    (tmp_path / "overlayfs").mkdir()
    (tmp_path / "speculate").mkdir()
    (tmp_path / "speculate" / "gate.py").write_text(
        'def check(name, rule):\n    if name == "Bash":\n        return 1\n    if name in ("Write", "Edit"):\n'
        '        return 2\n    match name:\n        case "Read":\n            return 3\n'
        '    return rule.startswith("Bash(") or "Grep" != name\n'
    )
    assert [f.split(": ")[0] for f in name_comparisons(tmp_path, NAMES)] == [
        "speculate/gate.py:2",
        "speculate/gate.py:4",
        "speculate/gate.py:7",
        "speculate/gate.py:9",
        "speculate/gate.py:9",
    ]
    (tmp_path / "speculate" / "sets.py").write_text('EDITS = frozenset({"Edit", "Write"})\nONE = ("Read",)\n')
    assert name_collections(tmp_path, NAMES) == [
        "speculate/gate.py:4: ['Edit', 'Write']",
        "speculate/sets.py:1: ['Edit', 'Write']",
    ]


def test_the_registry_is_where_the_sets_come_from() -> None:
    tools = registry.TOOLS
    assert [t.name for t in default_tools()] == list(registry.NAMES)
    assert len(set(registry.NAMES)) == len(tools) and not set(registry.NAMES) & set(registry.CLAUDE_CODE_ONLY)
    for name, cls in registry.REGISTRY.items():
        assert cls.name == name and registry.get(name) is cls
        # What a tool declares is consistent: a path for what writes files or searches a directory.
        assert not (cls.writes_files or cls.searches_directory) or cls.path_field
        assert cls.path_field is None or cls.path_field in cls.Input.model_fields, name
        assert cls.rule_family is None or cls.rule_family in registry.REGISTRY, name
        assert not cls.runs_commands or "command" in cls.Input.model_fields, name
        assert (
            set(cls.diff_fields) <= set(cls.Input.model_fields)
            and (cls.shown_as == "diff") == cls.writes_files
        )
    assert registry.WRITE_TOOLS == {n for n, c in registry.REGISTRY.items() if c.writes_files}
    assert registry.SHELL_TOOLS == {registry.SHELL}
    # Claude Code's families: Edit(path) rules cover the tools that edit files, Read rules those that read.
    assert registry.RULE_COVERS[registry.EDIT_RULES] >= registry.WRITE_TOOLS
    assert registry.RULE_COVERS[registry.READ_RULES] == {"Read", "Glob", "Grep"}
    assert registry.DENY_COVERS[registry.READ_RULES] == {"Read", "Glob", "Grep"} | registry.WRITE_TOOLS
    assert registry.FILE_READERS == {n for n in registry.PATH_FIELDS if n not in registry.DIRECTORY_TOOLS}
    assert {"Read", "Write", "Edit"} <= registry.FILE_READERS
    assert registry.get("mcp__server__tool") is None
