"""Rules files (``.claude/rules/*.md``), their ``paths`` scoping, and the ``claudeMdExcludes`` setting.

As Claude Code 2.1.332 does (observed against the simulator; docs/claude-code.md, "Instructions"):

- A rules directory is read recursively in directory order (the order the file system lists it, as
  Claude Code's ``readdir``; not sorted), every ``*.md`` file a rule; other files are ignored.
- A rule whose front matter has ``paths`` is *scoped*: it is not loaded at start but attached after a tool
  result, the first time a file it matches is read or written. ``paths`` is a list or one string (commas
  at the top level separate patterns, ``{a,b}`` expands); a trailing ``/**`` is dropped; no pattern, or only
  ``**``, makes the rule unscoped. Patterns match as gitignore lines, ignoring case, against the file's path
  relative to the directory holding ``.claude`` (a user rule: the working directory); ``*.py`` matches at any
  depth, ``src/*.ts`` only below that directory, and a directory pattern covers the files under it.
- ``claudeMdExcludes`` (every settings file's list, joined) holds glob patterns matched against a file's
  absolute path (``**`` crosses directories, ``*`` does not, dot files match); an absolute pattern also
  matches through a symbolic link in its directory part; ``!`` negates. A relative pattern without ``**/``
  never matches an absolute path. It applies to every CLAUDE.md, CLAUDE.local.md, rule and import.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from speculate.tools.globmatch import compile_glob, translate

Excluded = Callable[[Path], bool]


def host_listdir(d: Path) -> list[str] | None:
    """The host's entries of ``d`` in the file system's own order, or None when it is not a directory."""
    try:
        return os.listdir(d)
    except OSError:
        return None


def walk_rules(rules_dir: Path, *, listdir: Callable[[Path], list[str] | None] | None = None) -> list[Path]:
    """:func:`rule_files` with subdirectories in their place: ``a.md``, ``sub/`` then ``b.md`` gives a.md,
    sub's files, b.md (Claude Code descends where the directory is listed)."""
    ls = listdir or host_listdir
    out: list[Path] = []
    seen: set[str] = set()

    def visit(d: Path) -> None:
        real = os.path.realpath(d)
        if real in seen or (names := ls(d)) is None:
            return
        seen.add(real)
        for name in names:
            p = d / name
            if ls(p) is not None:
                visit(p)
            elif name.endswith(".md"):
                out.append(p)

    visit(rules_dir)
    return out


@functools.lru_cache(maxsize=512)
def _gitignore(pattern: str) -> tuple[re.Pattern[str], bool, bool] | None:
    """A gitignore line as the ``ignore`` package reads it: (regex over one path, negated, directories only)."""
    p = re.sub(r"(?<!\\) +$", "", pattern)
    if not p or p.startswith("#"):
        return None
    negated = p.startswith("!")
    p = p[1:] if negated else p.removeprefix("\\")
    dir_only = p.endswith("/")
    p = p.rstrip("/")
    if not p:
        return None
    anchored = "/" in p
    body = translate(p.lstrip("/"))
    rx = ("" if anchored else "(?:.*/)?") + body
    return re.compile(rf"(?s:{rx})\Z", re.I), negated, dir_only


def matches(globs: Sequence[str], rel: str) -> bool:
    """Do the gitignore-style ``globs`` cover ``rel`` (a relative POSIX path to a file), ignoring case? A
    pattern that covers one of its directories covers it too."""
    if not rel or rel.startswith("../") or rel == ".." or os.path.isabs(rel):
        return False
    compiled = [c for g in globs if (c := _gitignore(g)) is not None]
    parts = rel.split("/")
    for k in range(1, len(parts) + 1):
        path, is_dir = "/".join(parts[:k]), k < len(parts)
        hit = False
        for rx, negated, dir_only in compiled:
            if (is_dir or not dir_only) and rx.match(path):
                hit = not negated
        if hit:
            return True
    return False


def excluder(patterns: Iterable[str]) -> Excluded:
    """The ``claudeMdExcludes`` test: is this absolute path excluded?"""
    pats = [p.replace("\\", "/") for p in patterns if p]
    for p in list(pats):  # an absolute pattern also through a symbolic link in its directory part
        if p.startswith("/"):
            static = p[: m.start()] if (m := re.search(r"[*?{[]", p)) else p
            top = os.path.dirname(static)
            real = os.path.realpath(top)
            if real != top and os.path.isabs(real):
                pats.append(real + p[len(top) :])
    if not pats:
        return lambda _path: False
    tests = [_glob_test(p) for p in pats]
    return lambda path: any(t(str(path).replace("\\", "/")) for t in tests)


def _glob_test(pattern: str) -> Callable[[str], bool]:
    if pattern.startswith("!"):
        inner = _glob_test(pattern[1:])
        return lambda s: not inner(s)
    try:
        rx = compile_glob(pattern)
    except ValueError:
        return lambda s: s == pattern
    return lambda s: rx.match(s) is not None
