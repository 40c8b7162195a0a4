"""The permission gate: may this tool call run now, must the user be asked, or is it refused?

Modes (as in Claude Code): ``default`` asks before edits and before Bash that may write; ``acceptEdits``
also lets Write/Edit through; ``bypassPermissions`` lets everything through; ``plan`` denies anything that
is not read-only. Rules ``Tool`` or ``Tool(specifier)`` in ``deny``, ``ask`` and ``allow`` lists are checked
first, in that order (deny wins). ``Bash(git *)``: ``*`` matches any text, a trailing `` *`` (or legacy
``:*``) also matches the bare command; a compound command (``a && b | c``) is allowed by rules only if every
part is, and denied if any part is. Path rules (``Edit(src/**)``, ``Read(*.md)``) use gitignore-style
globs relative to the project root; an ``Edit`` rule also covers Write, a ``Read`` rule also Glob and Grep.
MCP tools are named ``mcp__<server>__<tool>``: a rule ``mcp__server`` (or ``mcp__server__*``) covers every
tool of that server, ``mcp__server__tool`` one tool; MCP rules take no specifier.

The gate only decides; asking the user (an async callback) is the loop's business.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel

from overlayfs.paths import PathEscapeError, to_relative
from speculate.tools.base import Tool
from speculate.tools.globmatch import match_ignore_style

Mode = Literal["default", "acceptEdits", "bypassPermissions", "plan"]
Behavior = Literal["allow", "ask", "deny"]
MODES: tuple[str, ...] = get_args(Mode)
KNOWN_TOOLS = frozenset({"Read", "Write", "Edit", "Glob", "Grep", "Bash"})
EDIT_TOOLS = frozenset({"Write", "Edit"})
# A rule naming the key tool also applies to these tools.
RULE_COVERS = {"Edit": {"Edit", "Write"}, "Read": {"Read", "Glob", "Grep"}}
PATH_FIELDS = {"Read": "file_path", "Write": "file_path", "Edit": "file_path", "Glob": "path", "Grep": "path"}


class PermissionRuleError(ValueError):
    """A permission rule string that does not parse; the message names the rule."""


@dataclass(frozen=True)
class Decision:
    behavior: Behavior
    reason: str  # for a denial: the content of the is_error tool_result
    rule: str | None = None  # the rule that decided, if one did


_RULE_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)(?:\((.*)\))?$", re.S)
_MCP_ALL_RE = re.compile(r"^(mcp__[A-Za-z0-9_-]+?)__\*$")


@dataclass(frozen=True)
class Rule:
    tool: str
    specifier: str | None  # None: every use of the tool
    text: str

    @classmethod
    def parse(cls, text: str, *, known_tools: Iterable[str] = KNOWN_TOOLS) -> Rule:
        stripped = text.strip()
        if m := _MCP_ALL_RE.match(stripped):  # "mcp__server__*": the whole server
            return cls(tool=m.group(1), specifier=None, text=stripped)
        m = _RULE_RE.match(stripped)
        if not m:
            raise PermissionRuleError(
                f"invalid permission rule {text!r}: expected Tool or Tool(specifier), e.g. 'Bash(git *)'"
            )
        tool, spec = m.group(1), m.group(2)
        known = set(known_tools)
        if tool.startswith("mcp__"):
            if spec is not None:
                raise PermissionRuleError(f"invalid permission rule {text!r}: MCP rules take no specifier")
            return cls(tool=tool, specifier=None, text=stripped)  # servers may connect later: not checked
        if tool not in known:
            raise PermissionRuleError(
                f"invalid permission rule {text!r}: unknown tool {tool!r} (known: {', '.join(sorted(known))})"
            )
        if spec is not None:
            spec = spec.strip()
            if spec == "":
                raise PermissionRuleError(f"invalid permission rule {text!r}: empty specifier in parentheses")
            if spec == "*":
                spec = None
        return cls(tool=tool, specifier=spec, text=text.strip())

    def covers(self, tool_name: str) -> bool:
        if self.tool.startswith("mcp__") and self.tool.count("__") == 1:  # a whole server
            return tool_name.startswith(self.tool + "__")
        return tool_name in RULE_COVERS.get(self.tool, {self.tool})


def _bash_pattern(spec: str) -> re.Pattern[str]:
    if spec.endswith(":*"):  # legacy prefix form: "npm run test:*"
        spec = spec[:-2] + " *"
    body = ".*".join(re.escape(part) for part in spec.split("*"))
    if spec.endswith(" *"):  # "git *" also matches a bare "git"
        body = body[: -len(re.escape(" ") + ".*")] + "(?: .*)?"
    return re.compile(body + r"\Z", re.S)


_SPLIT_OPS = ("&&", "||", ";", "|", "&", "\n")


def split_command(command: str) -> tuple[list[str], bool]:
    """The simple commands of a compound command line, and whether it substitutes commands.

    Quote-aware (single, double, backslash) but no full parser: it errs towards more parts, which makes
    allow rules stricter and deny rules broader.
    """
    parts: list[str] = []
    cur: list[str] = []
    quote: str | None = None
    subst = False
    i, n = 0, len(command)
    while i < n:
        c = command[i]
        if quote == "'":
            cur.append(c)
            quote = None if c == "'" else quote
            i += 1
            continue
        if c == "\\" and i + 1 < n:
            cur.append(command[i : i + 2])
            i += 2
            continue
        if c == "`" or command.startswith(("$(", "<(", ">("), i):
            subst = True
        if quote == '"':
            cur.append(c)
            quote = None if c == '"' else quote
            i += 1
            continue
        if c in "'\"":
            quote = c
            cur.append(c)
            i += 1
            continue
        op = next((o for o in _SPLIT_OPS if command.startswith(o, i)), None)
        # ">&" / "&>" / "2>&1" are redirections, not the background operator.
        if op == "&" and ((i > 0 and command[i - 1] in "<>") or command.startswith("&>", i)):
            op = None
        if op:
            parts.append("".join(cur).strip())
            cur = []
            i += len(op)
            continue
        cur.append(c)
        i += 1
    parts.append("".join(cur).strip())
    return [p for p in parts if p], subst


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
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown permission mode {mode!r} (modes: {', '.join(MODES)})")
        known = frozenset(known_tools)
        self.mode: Mode = mode
        self.allow = tuple(Rule.parse(r, known_tools=known) for r in allow)
        self.deny = tuple(Rule.parse(r, known_tools=known) for r in deny)
        self.ask = tuple(Rule.parse(r, known_tools=known) for r in ask)
        # Absolute paths in tool inputs are matched relative to this root.
        self.root = Path(os.path.abspath(root)) if root is not None else None

    def __repr__(self) -> str:
        counts = f"allow={len(self.allow)}, deny={len(self.deny)}, ask={len(self.ask)}"
        return f"PermissionGate(mode={self.mode!r}, {counts})"

    def check(self, tool: Tool, inp: BaseModel | Mapping[str, Any]) -> Decision:
        """The decision for one call; ``inp`` raw (validated here, ToolError if invalid) or parsed."""
        if not isinstance(inp, BaseModel):
            inp = tool.parse(inp)
        name = tool.name
        if rule := self._first(self.deny, name, inp, any_part=True):
            return Decision("deny", f"Permission to use {name} was denied by rule {rule.text!r}.", rule.text)
        read_only = tool.is_read_only(inp)
        if self.mode == "plan" and not read_only:
            what = "Bash command that may change state" if name == "Bash" else f"{name} (it changes files)"
            return Decision(
                "deny",
                f"Plan mode: no changes allowed, so this {what} was refused. Only read-only tools may run.",
            )
        if rule := self._first(self.ask, name, inp, any_part=True):
            return Decision("ask", f"Rule {rule.text!r} requires confirmation for {name}.", rule.text)
        if rule := self._first(self.allow, name, inp, any_part=False):
            return Decision("allow", f"Allowed by rule {rule.text!r}.", rule.text)
        if self.mode == "bypassPermissions":
            return Decision("allow", "bypassPermissions mode.")
        if read_only:
            return Decision("allow", f"{name} is read-only.")
        if self.mode == "acceptEdits" and name in EDIT_TOOLS:
            return Decision("allow", "acceptEdits mode allows file edits.")
        if name == "Bash":
            return Decision("ask", f"Bash command may change state and needs permission: {_cmd(inp)}")
        target = getattr(inp, "file_path", None)
        return Decision("ask", f"{name}{f' of {target}' if target else ''} needs permission.")

    # -- matching -----------------------------------------------------------------------------------------

    def _first(self, rules: Sequence[Rule], name: str, inp: BaseModel, *, any_part: bool) -> Rule | None:
        """First rule matching the call. For a compound Bash command: any part (deny/ask), or every part
        matched by some rule (allow); a command substitution never satisfies an allow rule."""
        candidates = [r for r in rules if r.covers(name)]
        if not candidates:
            return None
        if name == "Bash":
            command = _cmd(inp)
            parts, subst = split_command(command)
            for r in candidates:
                if r.specifier is None:
                    return r
            if any_part:
                return next(
                    (r for r in candidates if any(_bash_match(r, p) for p in [*parts, command])), None
                )
            # An exact rule (no wildcard) for the whole line is what "always allow this command" stores.
            exact = next(
                (r for r in candidates if r.specifier and "*" not in r.specifier and _bash_match(r, command)),
                None,
            )
            if exact or subst or not parts:
                return exact
            chosen = [next((r for r in candidates if _bash_match(r, p)), None) for p in parts]
            return chosen[0] if all(chosen) else None
        field = PATH_FIELDS.get(name)
        raw = getattr(inp, field, None) if field else None
        rel = self._relative(raw if raw is not None else ".")
        for r in candidates:
            if r.specifier is None:
                return r
            if rel is not None and _path_match(r.specifier, rel):
                return r
        return None

    def _relative(self, path: str) -> str | None:
        if self.root is None:
            return None if os.path.isabs(path) else path
        try:
            return to_relative(self.root, path)
        except (PathEscapeError, FileNotFoundError):
            return None  # outside the project: no path rule matches; the tool itself refuses it


def _cmd(inp: BaseModel) -> str:
    return str(getattr(inp, "command", ""))


def _bash_match(rule: Rule, command: str) -> bool:
    assert rule.specifier is not None
    return _bash_pattern(rule.specifier).match(command.strip()) is not None


def _path_match(spec: str, rel: str) -> bool:
    """gitignore-style: the pattern matches the path or one of its parent directories."""
    parts = [] if rel == "." else rel.split("/")
    return any(match_ignore_style(spec, "/".join(parts[:k])) for k in range(1, len(parts) + 1))


__all__ = ["MODES", "Decision", "Mode", "PermissionGate", "PermissionRuleError", "Rule", "split_command"]
