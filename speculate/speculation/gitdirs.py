"""Where git would run something the guard's name list cannot know of: the directory the project's
``core.hooksPath`` names (``.githooks/pre-commit`` runs at the next commit), and any directory git would take
for a repository (an embedded bare one, ``vendor/evil/{HEAD,objects,refs,config}``, whose ``core.fsmonitor``
runs at a ``git status`` there). Used by :mod:`speculate.speculation.guard`.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from speculate.sensitive import fold

# git's own test (setup.c, is_git_directory) is HEAD with objects/ and refs/, or HEAD with commondir; a
# fork that leaves HEAD beside any one of these is stopped: a later `mkdir refs` would finish the job.
GITDIR_MARK = "HEAD"
GITDIR_WITH = ("objects", "refs", "commondir", "config")
# Hook names (githooks(5)): where core.hooksPath is the project root itself, only these are protected.
GIT_HOOKS = frozenset(
    "applypatch-msg pre-applypatch post-applypatch pre-commit pre-merge-commit prepare-commit-msg "
    "commit-msg post-commit pre-rebase post-checkout post-merge pre-push pre-receive update "
    "proc-receive post-receive post-update reference-transaction push-to-checkout pre-auto-gc "
    "post-rewrite sendemail-validate fsmonitor-watchman p4-changelist p4-prepare-changelist "
    "p4-post-changelist p4-pre-submit post-index-change".split()
)
GIT_TIMEOUT_S = 5.0


def hooks_dir(root: Path) -> str | None:
    """The project-relative directory that ``core.hooksPath`` names for the repository at ``root`` ("."
    for the root itself), or None: unset, outside the project (a fork cannot write there), or no git.
    Asked of git itself (every config file, includes, ``~``), else read from ``.git/config`` and its
    plain includes."""
    value, top = _from_git(root)
    if value is None and top is None:
        value, top = _from_files(root), root
    if not value:
        return None
    where = Path(os.path.expanduser(value))
    if not where.is_absolute():
        where = (top or root) / where  # relative to where hooks run: the top of the work tree
    rel = os.path.relpath(os.path.realpath(where), os.path.realpath(root))
    if rel == ".." or rel.startswith("../"):
        return None
    return rel.replace(os.sep, "/")


def _from_git(root: Path) -> tuple[str | None, Path | None]:
    """(core.hooksPath, the work tree's top) from git; (None, None) where git is missing or fails."""
    try:
        top = subprocess.run(
            ["git", "-C", os.fspath(root), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
        )
        if top.returncode != 0:
            return None, None
        got = subprocess.run(
            ["git", "-C", os.fspath(root), "config", "--get", "core.hooksPath"],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError):
        return None, None
    value = got.stdout.strip() if got.returncode == 0 else ""
    return value, Path(top.stdout.strip())


_SECTION = re.compile(r'^\s*\[\s*([A-Za-z0-9.-]+)(?:\s+"[^"]*")?\s*\]\s*(.*)$')
_ENTRY = re.compile(r"^\s*([A-Za-z][A-Za-z0-9-]*)\s*(?:=\s*(.*?))?\s*$")


def _from_files(root: Path) -> str | None:
    """core.hooksPath from ``root/.git/config`` and the files its ``[include] path`` names (the last
    value wins, as in git); quoting and escapes beyond a plain double-quoted value are not read."""
    value: str | None = None
    seen: set[str] = set()

    def read(path: Path, depth: int) -> None:
        nonlocal value
        if depth > 10 or os.fspath(path) in seen:
            return
        seen.add(os.fspath(path))
        try:
            text = path.read_text(errors="replace")
        except OSError:
            return
        section = ""
        for line in text.splitlines():
            line = re.sub(r"\s[#;].*$|^[#;].*$", "", line)
            m = _SECTION.match(line)
            if m:
                section, line = m.group(1).lower(), m.group(2)
            e = _ENTRY.match(line)
            if e is None or e.group(2) is None:
                continue
            key, val = e.group(1).lower(), e.group(2).strip().strip('"')
            if section == "core" and key == "hookspath":
                value = val
            elif section == "include" and key == "path":
                inc = Path(os.path.expanduser(val))
                read(inc if inc.is_absolute() else path.parent / inc, depth + 1)

    read(root / ".git" / "config", 0)
    return value


def in_hooks_dir(rel: str, hooks: str) -> bool:
    """Is ``rel`` (project-relative) the hooks directory ``hooks`` or inside it, folded as the guard folds
    names (a case-insensitive project has one ``.githooks``)."""
    parts = [fold(p) for p in rel.split("/") if p not in ("", ".")]
    if hooks == ".":
        return len(parts) == 1 and parts[0] in {fold(h) for h in GIT_HOOKS}
    want = [fold(p) for p in hooks.split("/") if p not in ("", ".")]
    return parts[: len(want)] == want


def git_dir_of(fs: Any, rel: str, *, adding: str | None = None) -> str | None:
    """The directory at or above ``rel`` (project-relative, in the merged view ``fs``) that git would take
    for a repository, or None. ``adding``: a path about to be written (its first name under each directory
    counts as present)."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    for k in range(len(parts), -1, -1):
        d = "/".join(parts[:k]) or "."
        extra = None
        if adding is not None:
            under = [p for p in adding.split("/") if p not in ("", ".")]
            if under[:k] == parts[:k] and len(under) > k:
                extra = under[k]
        if looks_like_git_dir(fs, d, extra):
            return d
    return None


def looks_like_git_dir(fs: Any, d: str, extra: str | None = None) -> bool:
    """HEAD beside objects, refs, commondir or config in directory ``d`` of ``fs`` (``extra``: one more
    name taken as present)."""

    def has(name: str) -> bool:
        if extra == name:
            return True
        try:
            fs.lstat(name if d == "." else f"{d}/{name}")
        except OSError:
            return False
        return True

    return has(GITDIR_MARK) and any(has(n) for n in GITDIR_WITH)


def git_dirs(fs: Any, paths: Iterable[str]) -> dict[str, str]:
    """For each of ``paths`` under a directory git would take for a repository: that directory. Each
    directory is looked at once."""
    seen: dict[str, bool] = {}
    out: dict[str, str] = {}
    for rel in paths:
        parts = [p for p in rel.split("/") if p not in ("", ".")]
        for k in range(len(parts), -1, -1):
            d = "/".join(parts[:k]) or "."
            if d not in seen:
                seen[d] = looks_like_git_dir(fs, d)
            if seen[d]:
                out[rel] = d
                break
    return out
