"""What a fork may not leave in its overlay: writes to files that configure what runs later, special files,
and symlinks that lead out of the project.

:class:`Protection` names the paths a fork must not write: the instructions files (their own boundary,
``instructions``: the system prompt would change) and the *execution-config* paths, files that make
something run later without anyone reading them (git hooks and config, Claude Code's settings and MCP
servers, direnv, editor tasks, hook frameworks), the directory the project's ``core.hooksPath`` names and any
directory git would take for a repository (:mod:`speculate.speculation.gitdirs`), plus the user's
``speculation.protectedPaths`` patterns (``protected``).
A Write/Edit there stops the fork before it runs (:class:`speculate.speculation.authorize.SpecAuthorizer`);
:func:`check_overlay`, run after every sandboxed command and hook, stops it after one that left such a
write, a device node, FIFO or socket, or a symlink out of the project, and the overlay is discarded
(nothing of it could be promoted soundly).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from overlayfs.changes import Change
from overlayfs.paths import PathEscapeError, check_link_target, to_relative
from speculate.agent_types import BoundaryReached
from speculate.instructions import is_instructions_path
from speculate.sensitive import SENSITIVE_DIRS, SENSITIVE_FILES, sensitive_segment
from speculate.speculation.gitdirs import git_dir_of, git_dirs, hooks_dir, in_hooks_dir
from speculate.tools.globmatch import has_magic, match_ignore_style

# At any depth, ignoring case: a nested repository's hooks run as surely as the top one's, and direnv,
# editors, shells, hook frameworks and Claude Code read these from whichever directory the user opens. The
# permission gate's sensitive files (one list: speculate.sensitive), which the live path asks about.
EXECUTION_CONFIG: tuple[str, ...] = tuple(sorted(SENSITIVE_DIRS | SENSITIVE_FILES))
# Rewritten by read-only git commands (`git diff` refreshes the stat cache even with GIT_OPTIONAL_LOCKS=0).
GIT_INDEX = ".git/index"
MAX_LINKS = 40

Kind = Literal["instructions", "protected"]


def matches(pattern: str, rel: str) -> bool:
    """gitignore-style: the pattern (a trailing ``/`` ignored) matches ``rel`` or one of its parents."""
    pat = pattern.rstrip("/") or pattern
    parts = rel.split("/")
    return any(match_ignore_style(pat, "/".join(parts[:k])) for k in range(1, len(parts) + 1))


class Protection:
    """Which project-relative paths a fork must not write, and why (``kind``). Bound to a project
    (``root``, or the first overlay it checks, :meth:`bind`), it also protects the directory that project's
    ``core.hooksPath`` names."""

    def __init__(self, patterns: Iterable[str] = (), *, root: Path | None = None) -> None:
        self.patterns = (*EXECUTION_CONFIG, *patterns)
        self.root: Path | None = None
        self.hooks: str | None = None  # core.hooksPath, project-relative, where it lies inside the project
        if root is not None:
            self.bind(root)
        # The user's plain names (no "/", no glob) match a path segment: a set lookup, not a regex per
        # parent; the check runs over every change after every command. The sensitive list is its own check.
        extra = tuple(patterns)
        self._names = frozenset(p.rstrip("/") for p in extra if "/" not in p.rstrip("/") and not has_magic(p))
        self._globs = tuple(p for p in extra if p.rstrip("/") not in self._names)

    def bind(self, root: Path) -> None:
        """Read the project's ``core.hooksPath`` (once: a fork cannot change the real git config)."""
        if self.root is None:
            self.root = Path(root)
            self.hooks = hooks_dir(self.root)

    def kind(self, rel: str) -> Kind | None:
        rel = os.path.normpath(rel)
        if is_instructions_path(rel):
            return "instructions"
        if rel != "." and (
            sensitive_segment(rel) is not None
            or (self.hooks is not None and in_hooks_dir(rel, self.hooks))
            or not self._names.isdisjoint(rel.split("/"))
            or any(matches(p, rel) for p in self._globs)
        ):
            return "protected"
        return None

    def of_write(self, fs: Any, rel: str) -> Kind | None:
        """The kind of a Write/Edit of ``rel`` through the merged view ``fs``: the path as given, or where
        its symlinks lead (a link the fork made to ``.git/hooks`` is ``.git/hooks``), or a path in (or that
        would make) a directory git takes for a repository."""
        self.bind(fs.root)
        real = resolved(fs, rel)
        if (k := self.kind(rel) or (self.kind(real) if real not in (None, rel) else None)) is not None:
            return k
        at = real if real is not None else rel
        return "protected" if git_dir_of(fs, at, adding=at) is not None else None


# How the shell's git rule names the repository a writing subcommand changes (`git commit (repository)`).
REPOSITORY = " (repository)"


def command_boundary(
    cmd: str, *, root: Path, fs: Any, cwd: Path, protection: Protection
) -> tuple[Literal["instructions", "protected"], str] | None:
    """Where the parse of ``cmd`` (run in ``cwd``) says it writes what a fork may not leave in its overlay
    ``fs`` (over ``root``): the boundary *before* it, or None. Stopped there the fork's work so far can land
    and the command runs live on acceptance; run in the fork it would only make the overlay unlandable.
    What the parse cannot know (a path computed at run time, a script's writes) is left to
    :func:`check_overlay` after the command."""
    from speculate.shell.facts import analyze

    facts = analyze(cmd, cwd=cwd, home=os.path.expanduser("~"))
    for path, what in facts.writes:
        if path is None:
            continue
        try:
            rel = to_relative(root, path)
        except (PathEscapeError, FileNotFoundError):
            continue  # outside the project: the sandbox refuses it, as it refuses any write there
        if what.endswith(REPOSITORY):  # git's own writes: the repository the directory belongs to
            repo = repository_of(fs, rel)
            if repo is not None:
                return "protected", (
                    f"{cmd!r}: `{what.removesuffix(REPOSITORY)}` writes the repository ({repo}/), which "
                    "lands only through a normal turn: it runs live on acceptance"
                )
            continue
        kind = protection.of_write(fs, rel)
        if kind == "instructions":
            return "instructions", f"{cmd!r} writes {rel}: the next request's system prompt would change"
        if kind == "protected":
            return "protected", (
                f"{cmd!r} writes {rel}: it configures what runs later (git, editor, Claude Code, "
                "direnv, or speculation.protectedPaths); it runs live on acceptance"
            )
    return None


def repository_of(fs: Any, rel: str) -> str | None:
    """The repository a git command run in ``rel`` writes (project-relative, in the merged view ``fs``):
    the nearest ``.git`` (a directory, or a file naming one) at or above it, or a directory git takes for
    a repository itself; None when there is none in the project (git then writes nothing here, or fails)."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    for k in range(len(parts), -1, -1):
        d = "/".join(parts[:k])
        try:
            fs.lstat(f"{d}/.git" if d else ".git")
            return f"{d}/.git" if d else ".git"
        except OSError:
            pass
        if git_dir_of(fs, d or ".") == (d or "."):
            return d or "."
    return None


def resolved(fs: Any, rel: str) -> str | None:
    """``rel`` with every symlink in the merged view followed (the rest lexical where it does not exist
    yet); None when a link leads out of the project or loops."""
    parts, hops = [p for p in rel.split("/") if p not in ("", ".")], 0
    done: list[str] = []
    while parts:
        here = "/".join([*done, parts[0]])
        try:
            st = fs.lstat(here)
        except OSError:  # absent (or under a non-directory): the write creates it where it says
            return "/".join([*done, *parts])
        if not stat.S_ISLNK(st.st_mode):
            done.append(parts.pop(0))
            continue
        hops += 1
        try:
            if hops > MAX_LINKS:
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), rel)
            target = check_link_target(fs.root, here, fs.readlink(here))
        except OSError:  # PathEscapeError included
            return None
        parts, done = [*([] if target == "." else target.split("/")), *parts[1:]], []
    return "/".join(done) or "."


def leads_out(fs: Any, rel: str) -> bool:
    """Does the symlink at ``rel`` resolve outside the project (absolute elsewhere, ``..`` past the root,
    or through another link that does)?"""
    try:
        fs.stat(rel)  # follows every link, checking each target against the project root
    except PathEscapeError:
        return True
    except OSError:
        return False  # dangling inside the project, or a loop: nothing outside is reached
    return False


def check_overlay(
    fs: Any,
    changes: Sequence[Change],
    *,
    protection: Protection,
    command: str,
    read_only: Callable[[str], bool] | None = None,
) -> None:
    """After a sandboxed command (or hook): raise BoundaryReached(discard=True) if the overlay now holds a
    write to a protected path, a special file, or a symlink out of the project.

    ``read_only(command)``: the command is one the classifier calls read-only; its rewrite of ``.git/index`` (git's
    stat cache, refreshed by `git diff` and `git show`) is dropped from the overlay instead, so that the
    real index is left as the user's git keeps it."""
    special = [c.path for c in changes if c.kind != "deleted" and c.type == "other"]
    if special:
        raise BoundaryReached(
            "unsafe_file",
            f"{command!r} made {_names(special)}: a device node, FIFO or "
            "socket, which the project cannot receive",
            discard=True,
        )
    out = [c.path for c in changes if c.kind != "deleted" and c.type == "symlink" and leads_out(fs, c.path)]
    if out:
        raise BoundaryReached(
            "unsafe_file",
            f"{command!r} made {_names(out)}: a symlink that leads out of the project",
            discard=True,
        )
    protection.bind(fs.root)
    hits = [(c.path, k) for c in changes if (k := protection.kind(c.path)) is not None]
    # A repository git would find there (HEAD beside objects/, refs/, config): its config and hooks run.
    named = {p for p, _ in hits}
    hits += [(p, "protected") for p in git_dirs(fs, [c.path for c in changes if c.path not in named])]
    if hits and all(p == GIT_INDEX for p, _ in hits) and read_only is not None and read_only(command):
        _drop_upper(fs, GIT_INDEX)
        return
    if any(k == "instructions" for _, k in hits):
        names = _names([p for p, k in hits if k == "instructions"])
        raise BoundaryReached(
            "instructions",
            f"{command!r} wrote {names}: the next request's system prompt would change",
            discard=True,
        )
    if hits:
        raise BoundaryReached(
            "protected",
            f"{command!r} wrote {_names([p for p, _ in hits])}: files that "
            "make something run later (git hooks, config or a repository, editor, Claude Code or direnv "
            "configuration, or speculation.protectedPaths) land only through a normal turn",
            discard=True,
        )


def _drop_upper(fs: Any, rel: str) -> None:
    """Remove the upper layer's copy of ``rel`` so that the real file shows through again (the upper layer
    is ours, and nothing is mounted between two commands)."""
    try:
        os.unlink(Path(fs.upper) / rel)
    except FileNotFoundError:
        pass


def _names(paths: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(sorted(paths)[:limit])
    return shown + (f" +{len(paths) - limit} more" if len(paths) > limit else "")
