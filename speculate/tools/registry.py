"""The tool registry: the built-in tools in the order the model is offered them, and every set of tool names
the rest of speculate needs, derived from what each tool declares (:class:`speculate.tools.base.Tool`'s
capabilities: ``path_field``, ``writes_files``, ``runs_commands``, ``rule_family``, ``speculative``,
``shown_as``, ``hook_response``).

This is the one place that knows tool names: the permission gate, the speculation engine, the hooks, the
REPL and the simulator ask it (or the tool object) instead of comparing names (tests/test_tool_names.py).
Adding a tool is its module, a line in :data:`TOOLS`, and its tests.

The order of :data:`TOOLS` is part of the prompt-cache key (the request's ``tools`` array): a new tool goes
at the end, and a parent and its forks offer the same list (docs/speculation.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from speculate.tools.base import Tool
from speculate.tools.bash import Bash
from speculate.tools.edit import Edit
from speculate.tools.glob import Glob
from speculate.tools.grep import Grep
from speculate.tools.notebook import NotebookEdit
from speculate.tools.read import Read
from speculate.tools.write import Write

TOOLS: tuple[type[Tool], ...] = (Read, Write, Edit, Glob, Grep, Bash, NotebookEdit)
REGISTRY: Mapping[str, type[Tool]] = {t.name: t for t in TOOLS}
NAMES: tuple[str, ...] = tuple(REGISTRY)

# Tools Claude Code has that speculate does not implement: a scenario may script calls of them (the agent
# answers "No such tool", a fork stops at a denied_tool boundary) and an imported transcript keeps them.
# Rules naming them are noted at start, not applied (speculate.settings).
CLAUDE_CODE_ONLY: tuple[str, ...] = ("WebSearch", "WebFetch", "Task", "Agent", "TodoWrite")

# -- permission rules -------------------------------------------------------------------------------------
READ_RULES = Read.name  # the rule family of tools that read files (Read, Glob, Grep)
EDIT_RULES = Edit.name  # the rule family of tools that edit files (Edit, Write, NotebookEdit)
SHELL = Bash.name  # the shell tool: its rules take command specifiers (speculate.permission_bash)
READER = Read.name  # the tool that reads one file (the REPL attaches an @mention with it)

KNOWN_TOOLS: frozenset[str] = frozenset(NAMES)  # tool names a permission rule may use
# The input field naming each tool's file or directory.
PATH_FIELDS: Mapping[str, str] = {t.name: t.path_field for t in TOOLS if t.path_field}
DIRECTORY_TOOLS: frozenset[str] = frozenset(t.name for t in TOOLS if t.searches_directory)
# A rule naming the key also covers these tools (Claude Code: Edit rules cover every tool that edits files;
# Read rules, best effort, every tool that reads them).
RULE_COVERS: Mapping[str, frozenset[str]] = {
    family: frozenset({family, *(t.name for t in TOOLS if t.rule_family == family)})
    for family in dict.fromkeys(t.rule_family for t in TOOLS if t.rule_family)
}
WRITE_TOOLS: frozenset[str] = frozenset(t.name for t in TOOLS if t.writes_files)
# A Read *deny* rule also refuses writing the paths it covers (Claude Code: "File is covered by a Read deny
# rule in your permission settings and cannot be edited").
DENY_COVERS: Mapping[str, frozenset[str]] = {READ_RULES: RULE_COVERS[READ_RULES] | WRITE_TOOLS}
# Tools that act on a path: Claude Code refuses a path a deny rule covers while checking their input.
FILE_TOOLS: frozenset[str] = frozenset(PATH_FIELDS)
# Tools whose file (not directory) a PostToolUse hook is shown (re-read after the call).
FILE_READERS: frozenset[str] = frozenset(n for n in PATH_FIELDS if n not in DIRECTORY_TOOLS)
SHELL_TOOLS: frozenset[str] = frozenset(t.name for t in TOOLS if t.runs_commands)

# -- speculation ------------------------------------------------------------------------------------------
SPECULATIVE_TOOLS: frozenset[str] = frozenset(t.name for t in TOOLS if t.speculative)


def get(name: str) -> type[Tool] | None:
    """The built-in tool class named ``name``, or None (an MCP tool, or a name the model made up)."""
    return REGISTRY.get(name)


def path_of(name: str, inp: Mapping[str, object]) -> str | None:
    """The path a call of tool ``name`` with raw input ``inp`` acts on, as given (None: no path field, or
    the field left out)."""
    field = PATH_FIELDS.get(name)
    value = inp.get(field) if field else None
    return str(value) if value is not None else None


def default_tools() -> list[Tool]:
    """Fresh instances of the built-in tools in :data:`TOOLS` order."""
    return [t() for t in TOOLS]
