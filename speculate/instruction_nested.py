"""Instructions attached to tool results: subdirectories' CLAUDE.md files and path-scoped rules.

The first time the agent reads or writes a file (Read, Edit, Write; not Glob or Grep), Claude Code 2.1.332
attaches, after that message's tool results, one ``<system-reminder>`` per instructions file that the file
brings in and the conversation does not hold yet, in this order:

1. the user's scoped rules (``~/.claude/rules``) whose ``paths`` match the file, relative to the working
   directory;
2. for each directory below the working directory down to the file's: its ``CLAUDE.md``,
   ``.claude/CLAUDE.md``, ``CLAUDE.local.md`` (each with its imports), its unscoped rules, then its scoped
   rules that match (relative to that directory);
3. for the working directory and each directory above it, from the top: its scoped rules that match,
   relative to it.

The system prompt, and so the cache key, stay as they were (docs/claude-code.md, "Instructions"). "Once" is
read from the conversation itself, so a fork, a resumed or a compacted conversation agree. A fork reads the
project's files through its overlay; files outside the project from the host.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from speculate.instruction_imports import Loaded, expand
from speculate.instruction_rules import Excluded, excluder, host_listdir, matches, walk_rules
from speculate.instructions import FILE_BUDGET, PROJECT_FILES, RULES_DIR, _read, cut, top_down, user_dir
from speculate.settings import claude_md_excludes

if TYPE_CHECKING:
    from speculate import FileSystem

NESTED_TOOLS = frozenset({"Read", "Edit", "Write"})  # Claude Code 2.1.332: not Glob or Grep
Read = Callable[[Path], str | None]
ListDir = Callable[[Path], list[str] | None]


def reminder(path: Path | str, text: str) -> str:
    """One instructions file as Claude Code attaches it after a tool result."""
    return f"<system-reminder>\nContents of {path}:\n\n{text}\n</system-reminder>"


_SENT_RE = re.compile(r"^<system-reminder>\nContents of (.+?):\n")


def sent_paths(texts: Iterable[str]) -> set[str]:
    """The paths of the instructions already attached, from a conversation's text blocks."""
    return {m.group(1) for t in texts if (m := _SENT_RE.match(t))}


def _rel(file: Path, base: Path) -> str:
    return Path(os.path.relpath(file, base)).as_posix()


def nested_reminders(
    root: Path,
    touched: Iterable[Path],
    sent: Callable[[], set[str]],
    *,
    read: Read = _read,
    listdir: ListDir = host_listdir,
    user: Path | None = None,
    excluded: Excluded = lambda _p: False,
) -> list[str]:
    """The ``<system-reminder>`` blocks that the files ``touched`` (absolute paths the agent read or wrote)
    bring in, ``root`` being the working directory, leaving out those already in the conversation (``sent()``,
    asked only when there is a candidate) and those ``excluded``. ``read``/``listdir``: the host's files by
    default; a fork reads its overlay. ``user``: Claude Code's per-user directory."""
    blocks: list[str] = []
    attached: set[str] = set()
    already: set[str] | None = None
    walk = _Walk(root, read, listdir, (user or user_dir()) / "rules", excluded)
    for file in touched:
        for f in walk.brought_in(file):
            key = str(f.path)
            if key in attached:
                continue
            already = sent() if already is None else already
            if key not in already:
                attached.add(key)
                blocks.append(reminder(f.path, cut(f.text, FILE_BUDGET, f.path)[0]))
    return blocks


class _Walk:
    def __init__(
        self, root: Path, read: Read, listdir: ListDir, user_rules: Path, excluded: Excluded
    ) -> None:
        self.root, self.read, self.listdir = root, read, listdir
        self.user_rules, self.excluded = user_rules, excluded

    def brought_in(self, file: Path) -> list[Loaded]:
        """What a read or write of ``file`` brings in, in Claude Code's order (the module's docstring)."""
        root, seen = self.root, set[str]()  # "seen" per file, as Claude Code's walk has it
        rules = lambda d: walk_rules(d / RULES_DIR, listdir=self.listdir)  # noqa: E731
        rel = _rel(file, root)
        found = [
            f for p in walk_rules(self.user_rules, listdir=self.listdir) for f in self.load(p, seen, rel)
        ]
        parts = () if rel.startswith("../") else Path(rel).parent.parts
        for i in range(len(parts)):
            d = root.joinpath(*parts[: i + 1])
            found += [f for name, _ in PROJECT_FILES for f in self.load(d / name, seen, None)]
            unscoped = set(seen)  # Claude Code reads the unscoped ones with a copy of what it has seen
            found += [f for p in rules(d) for f in self.load(p, unscoped, "")]
            found += [f for p in rules(d) for f in self.load(p, seen, _rel(file, d))]
            seen |= unscoped
        for d in top_down(root):
            found += [f for p in rules(d) for f in self.load(p, seen, _rel(file, d))]
        return found

    def load(self, path: Path, seen: set[str], scope: str | None) -> list[Loaded]:
        """``path`` and its imports: all of them (``scope`` None: a CLAUDE.md), the unscoped ones (""), or the
        scoped ones that match the relative path ``scope``. A user rule's imports may be anywhere, a project
        file's stay in the working directory."""
        if (text := self.read(path)) is None:
            return []
        inside = None if path.is_relative_to(self.user_rules) else self.root
        found = expand(path, text, read=self.read, seen=seen, inside=inside, notes=[], excluded=self.excluded)
        if scope is None:
            return found
        if not scope:
            return [f for f in found if not f.globs]
        return [f for f in found if f.globs and matches(f.globs, scope)]


def nested_for_calls(
    fs: FileSystem,
    uses: Iterable[Mapping[str, Any]],
    results: Iterable[Mapping[str, Any]],
    messages: Iterable[Mapping[str, Any]],
) -> list[str]:
    """The agent's side of :func:`nested_reminders`: the files this round's successful Read, Edit and Write
    calls touched. The project's files are read through the agent's file system ``fs`` (a fork sees its own
    overlay), listed in the host's directory order where the host has them; files outside it from the host.
    ``claudeMdExcludes`` is read from the settings files as they are now."""
    root_of = getattr(fs, "root", None)
    if root_of is None:
        return []
    root = Path(root_of)
    ok = {r.get("tool_use_id") for r in results if not r.get("is_error")}
    touched = [
        Path(os.path.normpath(root / u["input"]["file_path"]))
        for u in uses
        if u.get("name") in NESTED_TOOLS
        and u.get("id") in ok
        and isinstance((u.get("input") or {}).get("file_path"), str)
    ]
    if not touched:
        return []

    def inside(path: Path) -> str | None:
        try:
            return str(path.relative_to(root))
        except ValueError:
            return None

    def read(path: Path) -> str | None:
        if (rel := inside(path)) is None:
            return _read(path)
        try:
            return fs.read_bytes(rel).decode("utf-8", errors="replace") if fs.is_file(rel) else None
        except (OSError, ValueError):
            return None

    def listdir(path: Path) -> list[str] | None:
        if (rel := inside(path)) is None:
            return host_listdir(path)
        try:
            names = fs.listdir(rel) if fs.is_dir(rel) else None
        except (OSError, ValueError):
            return None
        if names is None:
            return None
        host = [n for n in host_listdir(path) or [] if n in set(names)]  # Claude Code's order: the host's
        return host + [n for n in names if n not in set(host)]

    def sent() -> set[str]:
        return sent_paths(
            b.get("text", "")
            for m in messages
            if m.get("role") == "user" and isinstance(m.get("content"), list)
            for b in m["content"]
            if b.get("type") == "text"
        )

    excluded = excluder(claude_md_excludes(root))
    return nested_reminders(root, touched, sent, read=read, listdir=listdir, excluded=excluded)
