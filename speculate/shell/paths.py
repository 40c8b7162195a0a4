"""Where a path a command writes lands: inside the sandbox (project tree, /tmp) or not."""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterable

# Stands in for the project root when none is given: a NUL cannot occur in a real path.
NO_ROOT = "/\0project"
TEMP_DIRS = ("/tmp",)
NULL_SINKS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
_BRACE_EXPANSION = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")


_PROC_ALIAS = re.compile(r"/proc/(self|thread-self|[0-9]+)(/task/[0-9]+)?/(root|cwd)(?=/|$)")


def normalize(path: str) -> str:
    """The path the kernel would reach, lexically: ``..`` and ``//`` folded, and the /proc aliases of the
    root and the working directory (``/proc/self/root/etc`` is /etc, ``/proc/self/cwd/x`` is x)."""
    p = posixpath.normpath(path) if path else path
    if p.startswith("//"):
        p = "/" + p.lstrip("/")
    m = _PROC_ALIAS.match(p)
    if m is not None:
        rest = p[m.end() :].lstrip("/")
        return normalize("/" + rest) if m.group(3) == "root" else (rest or ".")
    return p


def locate(path: str | None, cwds: Iterable[str | None], root: str, *, real_root: bool) -> str | None:
    """None when every reading of ``path`` (from each possible working directory) is inside the project
    or /tmp, else why not. Lexical, plus symlink resolution inside a real project root."""
    if path is None:
        return "a path not known before running (expansion or substitution)"
    path = normalize(path)
    if path.startswith("~"):
        return f"{path} in the home directory"
    if _BRACE_EXPANSION.search(path):
        expanded = expand_braces(path)
        if expanded is None:
            return f"{path} (brace expansion too large to check)"
        return next((why for alt in expanded if (why := locate(alt, cwds, root, real_root=real_root))), None)
    if path.startswith("/"):
        candidates: list[str | None] = [posixpath.normpath(path)]
    else:
        candidates = [None if c is None else posixpath.normpath(posixpath.join(c, path)) for c in cwds]
    for full in candidates:
        if full is None:
            return f"{path} relative to a directory not known before running"
        if not _inside(full, root, real_root):
            return f"{path} outside the project".replace(NO_ROOT, "<project>")
    return None


def _under(path: str, base: str) -> bool:
    return path == base or path.startswith(base.rstrip("/") + "/")


def _inside(full: str, root: str, real_root: bool) -> bool:
    if _under(full, root):
        if not real_root:
            return True
        # A symlink inside the project may lead out of it.
        real = os.path.realpath(full)
        return _under(real, os.path.realpath(root)) or any(
            _under(real, os.path.realpath(t)) for t in TEMP_DIRS
        )
    return any(_under(full, t) for t in TEMP_DIRS)


def expand_braces(path: str, limit: int = 256) -> list[str] | None:
    """Bash brace expansion of comma lists; a range {a..b} stands for one component with no slash."""
    todo, done = [path], []
    while todo:
        item = todo.pop()
        m = _BRACE_EXPANSION.search(item)
        if m is None:
            done.append(item)
        elif m.group(1) == "..":
            todo.append(item[: m.start()] + "N" + item[m.end() :])
        else:
            todo += [item[: m.start()] + alt + item[m.end() :] for alt in m.group()[1:-1].split(",")]
        if len(todo) + len(done) > limit:
            return None
    return done
