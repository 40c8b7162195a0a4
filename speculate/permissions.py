"""The permission gate: may this tool call run now, must the user be asked, or is it refused?

Modes (as in Claude Code): ``default`` asks before edits and before Bash that may write; ``acceptEdits``
also lets the tools that edit files through (Write, Edit, ...: the registry's ``WRITE_TOOLS``);
``bypassPermissions`` lets everything through; ``plan`` denies anything that is not read-only. Rules (:mod:`speculate.permission_rules`: Claude Code's forms, ``Bash(git *)``,
``Read(./src/**)``, ``Edit(//abs/path)``, ``mcp__server``, ...) in ``deny``, ``ask`` and ``allow`` lists are
checked first, in that order (deny wins). A compound command (``a && b | c``) is allowed by rules only if
every part is, and denied if any part is. A tool that a deny rule refuses wholly (``Grep``, ``mcp__server``)
is not offered to the model at all (:meth:`PermissionGate.offered`).

The gate only decides; asking the user (an async callback) is the loop's business.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args

from pydantic import BaseModel

from speculate.permission_bash import Places as BashPlaces
from speculate.permission_bash import decide as decide_bash
from speculate.permission_bash import inside, sensitive_path
from speculate.permission_rules import (
    DIRECTORY_TOOLS,
    KNOWN_TOOLS,
    PATH_FIELDS,
    Behavior,
    Decision,
    PermissionRuleError,
    Places,
    Rule,
    RuleText,
    path_match,
    split_command,
    targets,
)
from speculate.tools.base import Tool
from speculate.tools.registry import READ_RULES, SHELL_TOOLS, WRITE_TOOLS

Mode = Literal["default", "acceptEdits", "bypassPermissions", "plan", "dontAsk"]
MODES: tuple[str, ...] = get_args(Mode)
EDIT_TOOLS = WRITE_TOOLS  # the tools acceptEdits lets through (speculate.tools.registry)
T = TypeVar("T", bound=Tool)


class PermissionGate:
    """Decides each tool call: ``check(tool, inp) -> Decision``. Keyword-only config; rules parse eagerly."""

    def __init__(
        self,
        *,
        mode: Mode = "default",
        allow: Sequence[str] = (),
        deny: Sequence[str] = (),
        ask: Sequence[str] = (),
        root: str | os.PathLike[str] | None = None,
        known_tools: Iterable[str] = KNOWN_TOOLS,
        home: str | os.PathLike[str] | None = None,
        additional_dirs: Sequence[str | os.PathLike[str]] = (),
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown permission mode {mode!r} (modes: {', '.join(MODES)})")
        known = frozenset(known_tools)
        self.mode: Mode = mode
        self.allow = tuple(Rule.parse(r, known_tools=known) for r in allow)
        self.deny = tuple(Rule.parse(r, known_tools=known) for r in deny)
        self.ask = tuple(Rule.parse(r, known_tools=known) for r in ask)
        # The project: relative tool paths and "./path" rules are relative to it ("/path" rules too, unless
        # their settings file says otherwise).
        self.root = Path(os.path.abspath(root)) if root is not None else None
        self.places = Places(
            cwd=self.root or Path.cwd(), home=Path(home) if home is not None else Path.home()
        )
        # The working directories (Claude Code's term): the project and ``additionalDirectories``. Reads
        # outside them ask; relative ones resolve against the project.
        self.additional_dirs = tuple(Path(os.path.abspath(self.places.cwd / d)) for d in additional_dirs)

    def __repr__(self) -> str:
        counts = f"allow={len(self.allow)}, deny={len(self.deny)}, ask={len(self.ask)}"
        return f"PermissionGate(mode={self.mode!r}, {counts})"

    def check(
        self, tool: Tool, inp: BaseModel | Mapping[str, Any], *, cwd: str | os.PathLike[str] | None = None
    ) -> Decision:
        """The decision for one call; ``inp`` raw (validated here, ToolError if invalid) or parsed.
        ``cwd``: the Bash tool's current directory (it persists across calls), default the project."""
        decision = self._check(tool, inp, cwd=cwd)
        if decision.behavior == "ask" and self.mode == "dontAsk":
            return Decision(
                "deny",
                f"dontAsk mode: {decision.reason} Asking is off, so it was refused.",
                decision.rule,
                firm=decision.firm,
                unasked=True,
            )
        return decision

    def _check(
        self, tool: Tool, inp: BaseModel | Mapping[str, Any], *, cwd: str | os.PathLike[str] | None = None
    ) -> Decision:
        if not isinstance(inp, BaseModel):
            inp = tool.parse(inp)
        name = tool.name
        if name in SHELL_TOOLS:
            return decide_bash(self, _cmd(inp), cwd=cwd)
        if rule := self._first(self.deny, name, inp, any_part=True, denying=True):
            return Decision("deny", f"Permission to use {name} was denied by rule {rule.text!r}.", rule.text)
        read_only = tool.is_read_only(inp)
        if self.mode == "plan" and not read_only:
            return Decision(
                "deny",
                f"Plan mode: no changes allowed, so this {name} (it changes files) was refused. "
                "Only read-only tools may run.",
            )
        if rule := self._first(self.ask, name, inp, any_part=True):
            return Decision(
                "ask", f"Rule {rule.text!r} requires confirmation for {name}.", rule.text, firm=True
            )
        path = self._path(name, inp)
        if (
            path is not None
            and name in EDIT_TOOLS
            and self.mode != "bypassPermissions"
            and self.sensitive(path)
        ):
            return Decision(
                "ask", f"Claude requested permissions to edit {path} which is a sensitive file.", firm=True
            )
        if rule := self._first(self.allow, name, inp, any_part=False):
            return Decision("allow", f"Allowed by rule {rule.text!r}.", rule.text)
        if self.mode == "bypassPermissions":
            return Decision("allow", "bypassPermissions mode.")
        if path is not None and not inside(path, self.working):
            verb = "write to" if name in EDIT_TOOLS else "read from"
            return Decision(
                "ask",
                f"Claude requested permissions to {verb} {path}, which is outside the working directories "
                f"for this session ({', '.join(self.working)}).",
            )
        if read_only:
            return Decision("allow", f"{name} is read-only.")
        if self.mode == "acceptEdits" and name in EDIT_TOOLS:
            return Decision("allow", "acceptEdits mode allows file edits.")
        field = PATH_FIELDS.get(name)
        target = getattr(inp, field, None) if field else None
        return Decision("ask", f"{name}{f' of {target}' if target else ''} needs permission.")

    @property
    def working(self) -> tuple[str, ...]:
        """The working directories (Claude Code's term): the project and ``additionalDirectories``."""
        return (str(self.places.cwd), *map(str, self.additional_dirs))

    def sensitive(self, path: str) -> bool:
        """Whether writing the absolute ``path`` needs the user whatever the rules say (:mod:`speculate.sensitive`)."""
        return sensitive_path(path, BashPlaces(str(self.places.cwd), str(self.places.home), self.working))

    def _path(self, name: str, inp: BaseModel) -> str | None:
        field = PATH_FIELDS.get(name)
        raw = getattr(inp, field, None) if field else None
        if field is None or (raw is None and name not in DIRECTORY_TOOLS):
            return None
        return os.path.normpath(os.path.join(self.places.cwd, os.path.expanduser(raw) if raw else "."))

    def hides(self, rel: str) -> bool:
        """Whether a Read deny rule covers the project file ``rel``: Glob and Grep leave it out of their
        results (Claude Code does the same; a search of a denied directory itself is refused by check)."""
        path = os.path.join(self.places.cwd, rel)
        return any(
            r.tool == READ_RULES
            and r.specifier is not None
            and path_match(r, path, self.places, directory=False)
            for r in self.deny
        )

    def withheld(self, name: str) -> Rule | None:
        """The deny rule that refuses every call of tool ``name`` (then it is not offered), or None."""
        return next((r for r in self.deny if r.specifier is None and r.covers(name, denying=True)), None)

    def offered(self, tools: Iterable[T]) -> list[T]:
        """``tools`` without the wholly denied ones, in their order (part of the cache key)."""
        return [t for t in tools if self.withheld(t.name) is None]

    # -- matching -----------------------------------------------------------------------------------------

    def _first(
        self, rules: Sequence[Rule], name: str, inp: BaseModel, *, any_part: bool, denying: bool = False
    ) -> Rule | None:
        """First rule matching a file or MCP tool's call (Bash: :mod:`speculate.permission_bash`). For a
        path: any of its forms (as written, symlinks resolved) for deny/ask, all of them for allow."""
        candidates = [r for r in rules if r.covers(name, denying=denying)]
        if not candidates:
            return None
        field = PATH_FIELDS.get(name)
        raw = getattr(inp, field, None) if field else None
        paths = targets(raw, self.places, resolve=any_part) if field else []
        directory = name in DIRECTORY_TOOLS
        for r in candidates:
            if r.specifier is None:
                return r
            if r.tool not in PATH_FIELDS or not paths:
                continue
            hits = [path_match(r, p, self.places, directory=directory) for p in paths]
            if any(hits) if any_part else all(hits):
                return r
        return None


def _cmd(inp: BaseModel) -> str:
    return str(getattr(inp, "command", ""))


__all__ = [
    "MODES",
    "Behavior",
    "Decision",
    "Mode",
    "PermissionGate",
    "PermissionRuleError",
    "Rule",
    "RuleText",
    "split_command",
]
