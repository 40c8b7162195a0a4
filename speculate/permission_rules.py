"""Permission rules as Claude Code writes them: parsing, which tools a rule covers, and matching a call.

A rule is ``Tool`` or ``Tool(specifier)``; ``Tool(*)`` is the same as ``Tool``. Specifiers by tool:

- ``Bash(git *)``: ``*`` matches any text; a trailing `` *`` (or the legacy ``:*``, ``Bash(npm run test:*)``)
  also matches the bare command and keeps a word boundary (``git *`` does not match ``gitk``). Compound
  commands are split by the gate (:func:`split_command`).
- ``Read(...)``, ``Edit(...)`` (and ``Write(...)``): a gitignore-style pattern, anchored by its prefix:
  ``//path`` from the filesystem root, ``~/path`` from the home directory, ``/path`` from the settings
  file's root (the project for ``.claude/settings*.json``, ``~/.claude`` for the user's settings: what
  Claude Code 2.1.332 does), ``./path`` or ``path`` from the working directory (the project). A pattern
  without ``/`` matches a name at any depth (``*.env``, ``./d.txt``); ``**`` spans directories; a rule
  matches a path when it matches the path or one of its parent directories. Case is ignored, as Claude
  Code ignores it.
- ``mcp__server`` or ``mcp__server__*``: every tool of that server; ``mcp__server__tool``: one tool.

A rule read from a settings file remembers the file (:class:`RuleText`, a ``str``): ``/path`` needs it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from speculate.errors import SpeculateError
from speculate.tools.globmatch import match_ignore_style
from speculate.tools.registry import DENY_COVERS, DIRECTORY_TOOLS, KNOWN_TOOLS, PATH_FIELDS, RULE_COVERS

# Which tools a rule names and covers, and which input field a path rule matches: the registry derives them
# from what each tool declares (speculate.tools.registry); they stay importable from here.


Behavior = Literal["allow", "ask", "deny"]


@dataclass(frozen=True)
class Decision:
    """The gate's answer for one call."""

    behavior: Behavior
    reason: str  # for a denial: the content of the is_error tool_result
    rule: str | None = None  # the rule that decided, if one did
    # An ask that neither an allow rule nor a PreToolUse hook's "allow" answers: an ask rule, a sensitive
    # file (Claude Code asks for those whatever the hook says).
    firm: bool = False
    # A denial that was an ask until dontAsk mode refused it: a PreToolUse hook's "allow" still answers it
    # (observed in Claude Code 2.1.332: in dontAsk a hook answering allow lets the call run).
    unasked: bool = False


class PermissionRuleError(SpeculateError, ValueError):
    """A permission rule string that does not parse; the message names the rule."""


class RuleText(str):
    """A rule's text with where it came from: ``source`` (the settings file) and ``base`` (the directory
    a ``/path`` specifier is relative to). A plain ``str`` rule has neither: ``/path`` is then relative
    to the project."""

    source: Path | None
    base: Path | None

    def __new__(cls, text: str, *, source: Path | None = None, base: Path | None = None) -> RuleText:
        self = super().__new__(cls, text)
        self.source, self.base = source, base
        return self


_RULE_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)(?:\((.*)\))?$", re.S)
_MCP_ALL_RE = re.compile(r"^(mcp__[A-Za-z0-9_-]+?)__\*$")


@dataclass(frozen=True)
class Rule:
    tool: str
    specifier: str | None  # None: every use of the tool
    text: str
    base: Path | None = None  # where "/path" specifiers are anchored (None: the project)

    @classmethod
    def parse(cls, text: str, *, known_tools: Iterable[str] = KNOWN_TOOLS) -> Rule:
        stripped = text.strip()
        base = getattr(text, "base", None)
        if m := _MCP_ALL_RE.match(stripped):  # "mcp__server__*": the whole server
            return cls(tool=m.group(1), specifier=None, text=stripped, base=base)
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
            return cls(tool=tool, specifier=None, text=stripped, base=base)  # servers may connect later
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
        return cls(tool=tool, specifier=spec, text=stripped, base=base)

    def covers(self, tool_name: str, *, denying: bool = False) -> bool:
        """Whether the rule applies to calls of ``tool_name`` (``denying``: as a deny rule)."""
        if self.tool.startswith("mcp__") and self.tool.count("__") == 1:  # a whole server
            return tool_name.startswith(self.tool + "__")
        if self.specifier is None and not denying:
            # Observed (Claude Code 2.1.332): a bare allow or ask rule names its own tool only; a bare
            # `Edit` leaves Write asking where `Edit(**)` covers it. A bare deny keeps the family (stricter).
            return tool_name == self.tool
        table = DENY_COVERS if denying and self.tool in DENY_COVERS else RULE_COVERS
        return tool_name in table.get(self.tool, {self.tool})


# -- Bash ------------------------------------------------------------------------------------------------


@lru_cache(maxsize=1024)  # checked against every simple command of every call
def bash_pattern(spec: str) -> re.Pattern[str]:
    if spec.endswith(":*"):  # legacy prefix form: "npm run test:*"
        spec = spec[:-2] + " *"
    body = ".*".join(re.escape(part) for part in spec.split("*"))
    if spec.endswith(" *"):  # "git *" also matches a bare "git"
        body = body[: -len(re.escape(" ") + ".*")] + "(?: .*)?"
    return re.compile(body + r"\Z", re.S)


def bash_match(rule: Rule, command: str) -> bool:
    assert rule.specifier is not None
    return bash_pattern(rule.specifier).match(command.strip()) is not None


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


# -- paths -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Places:
    """The directories path specifiers are anchored to."""

    cwd: Path  # "./path" and "path"; also what a relative tool path is relative to
    home: Path  # "~/path"


def anchor(rule: Rule, places: Places) -> tuple[Path, str]:
    """The directory a path rule is relative to, and its gitignore pattern there (leading ``/``: anchored)."""
    spec = rule.specifier or ""
    if spec.startswith("//"):
        return Path("/"), spec[1:]
    if spec == "~" or spec.startswith("~/"):
        return places.home, "/" + spec[2:] if len(spec) > 2 else "/**"
    if spec.startswith("/"):
        return rule.base or places.cwd, spec
    return places.cwd, spec[2:] if spec.startswith("./") else spec


def targets(raw: str | None, places: Places, *, resolve: bool) -> list[str]:
    """The absolute forms of a tool's path (relative: to the working directory); ``resolve`` adds the
    symlink-resolved one, so a link cannot dodge a deny rule."""
    path = os.path.normpath(os.path.join(places.cwd, raw if raw else "."))
    out = [path]
    if resolve:
        real = os.path.realpath(path)
        if real != path:
            out.append(real)
    return out


def path_match(rule: Rule, path: str, places: Places, *, directory: bool) -> bool:
    """Does the path rule cover the absolute ``path`` (``directory``: a directory searched as a whole)?"""
    root, pattern = anchor(rule, places)
    # Claude Code matches paths ignoring case (observed: Read(Private.txt) denies private.txt): a rule must
    # not be dodged by a case-insensitive file system's other spelling of the same file.
    pattern = pattern.casefold()
    rel = os.path.relpath(path, root).casefold()
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return False
    parts = [] if rel == "." else rel.split(os.sep)
    dir_only = pattern.endswith("/") and pattern.strip("/") != ""
    pattern = pattern.rstrip("/") if dir_only else pattern
    if pattern in ("", "/"):
        return True
    upto = len(parts) - 1 if dir_only and not directory else len(parts)
    if any(match_ignore_style(pattern, "/".join(parts[:k])) for k in range(1, upto + 1)):
        return True
    # A search of the directory itself is refused when its whole content is: "src/deep/**" covers "src/deep".
    return directory and bool(parts) and match_ignore_style(pattern, rel.replace(os.sep, "/") + "/")


__all__ = [
    "DIRECTORY_TOOLS",
    "KNOWN_TOOLS",
    "PATH_FIELDS",
    "Behavior",
    "Decision",
    "PermissionRuleError",
    "Places",
    "Rule",
    "RuleText",
    "bash_match",
    "path_match",
    "split_command",
    "targets",
]
