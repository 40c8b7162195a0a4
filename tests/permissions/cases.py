"""What the corpus is made of: a :class:`Call` (one scripted tool call, tagged with its category) and a
:class:`Config` (the settings, mode, files and trust it runs under; its calls are one scripted turn).

Strings in a call's input, in settings and in files may name the scratch directories with placeholders,
replaced per side (each agent gets its own copy): ``{root}`` the project, ``{home}`` the scratch HOME,
``{side}`` a sibling directory of the project, ``{base}`` the directory holding all three. Bash commands
mostly use relative paths and ``~`` instead, which need no replacing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Decision = Literal["allow", "ask", "deny"]
CATEGORIES = (
    "deny-evasion",
    "allow-overreach",
    "sensitive-files",
    "file-rules-in-bash",
    "case",
    "default-readonly",
    "modes",
    "settings",
    "hooks",
)
MODES = ("default", "acceptEdits", "plan", "dontAsk", "bypassPermissions")


@dataclass(frozen=True)
class Call:
    tool: str  # Bash | Read | Write | Edit | Glob | Grep
    input: dict[str, Any]
    category: str
    label: str  # unique within its configuration: the second half of the key

    @property
    def text(self) -> str:
        """One line for the report: the command, or the tool and its path."""
        if self.tool == "Bash":
            return str(self.input["command"])
        return f"{self.tool} {self.input.get('file_path') or self.input.get('pattern', '')}"


@dataclass(frozen=True)
class HookRule:
    """A PreToolUse hook: ``matcher`` as written in settings.json; it answers ``decision`` for a call whose
    input (as JSON) contains ``contains`` (``""``: every call it sees), and nothing otherwise."""

    matcher: str
    contains: str
    decision: Literal["allow", "ask", "deny"]


@dataclass(frozen=True)
class Config:
    name: str
    category: str
    calls: tuple[Call, ...]
    permissions: dict[str, Any] = field(default_factory=dict)  # .claude/settings.json's "permissions"
    mode: str | None = "default"  # --permission-mode; None: no flag (settings' defaultMode decides)
    files: dict[str, str] = field(default_factory=dict)  # path under {base} ("proj/x", "home/y") -> text
    hooks: tuple[HookRule, ...] = ()
    trusted: bool = True  # ~/.claude.json marks the project's trust dialog accepted
    user_permissions: dict[str, Any] = field(default_factory=dict)  # ~/.claude/settings.json's
    local_permissions: dict[str, Any] = field(default_factory=dict)  # .claude/settings.local.json's

    def key(self, call: Call) -> str:
        return f"{self.name}#{call.label}"


def bash(command: str, category: str, label: str | None = None) -> Call:
    return Call("Bash", {"command": command}, category, label or command)


def read(path: str, category: str, label: str | None = None) -> Call:
    return Call("Read", {"file_path": path}, category, label or f"Read {path}")


def write(path: str, category: str, content: str = "x\n", label: str | None = None) -> Call:
    return Call("Write", {"file_path": path, "content": content}, category, label or f"Write {path}")


def edit(path: str, old: str, new: str, category: str, label: str | None = None) -> Call:
    inp = {"file_path": path, "old_string": old, "new_string": new}
    return Call("Edit", inp, category, label or f"Edit {path}")


def config(name: str, category: str, calls: list[Call], **kw: Any) -> Config:
    """A configuration whose labels are made unique (a repeated label gets ``#2``, ``#3``, ...)."""
    seen: dict[str, int] = {}
    unique = []
    for c in calls:
        n = seen[c.label] = seen.get(c.label, 0) + 1
        unique.append(c if n == 1 else Call(c.tool, c.input, c.category, f"{c.label} #{n}"))
    return Config(name, category, tuple(unique), **kw)
