"""A diff as a person reads it: the files git ignores (``.gitignore`` files, ``.git/info/exclude``), such as
``.pytest_cache/`` and ``__pycache__/*.pyc`` a test run leaves, summarised in one line instead of shown as
hunks (``/diff``, ``/diff last`` and the acceptance question's list)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from speculate.tools.globmatch import match_ignore_style

Rule = tuple[bool, str, bool, str]  # negated, pattern, directories only, the directory of its .gitignore


def _rules(lines: list[str], base: str) -> list[Rule]:
    out: list[Rule] = []
    for ln in lines:
        s = ln.rstrip()
        if not s or s.startswith("#"):
            continue
        neg = s.startswith("!")
        s = s[1:] if neg else s
        dir_only = s.endswith("/")
        s = s.rstrip("/")
        if s:
            out.append((neg, s, dir_only, base))
    return out


def _read(f: Path) -> list[str]:
    try:
        return f.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []


class Ignored:
    """Which project-relative paths git would ignore here: ``.git/info/exclude`` and the ``.gitignore`` of
    each directory on the way (a pattern without ``/`` matches a name at any depth below its file, one
    with ``/`` is anchored there, a trailing ``/`` matches directories only, the last match wins, ``!``
    takes a path back)."""

    def __init__(self, project: Path, paths: Iterable[str]) -> None:
        self.rules = _rules(_read(project / ".git" / "info" / "exclude"), "")
        dirs = {""}
        for p in paths:
            parts = p.split("/")[:-1]
            dirs.update("/".join(parts[: i + 1]) for i in range(len(parts)))
        for d in sorted(dirs, key=lambda d: (d.count("/"), d)):
            self.rules += _rules(_read(project / d / ".gitignore"), d)

    def __call__(self, path: str) -> bool:
        parts = path.split("/")
        ignored = False
        for neg, pattern, dir_only, base in self.rules:
            for i in range(1, len(parts) + 1):
                if dir_only and i == len(parts):
                    continue  # the path itself is a file
                c = "/".join(parts[:i])
                if base and not c.startswith(base + "/"):
                    continue
                if match_ignore_style(pattern, c[len(base) + 1 :] if base else c):
                    ignored = not neg
                    break
        return ignored


def split_files(diff: str) -> list[tuple[str, str]]:
    """A ``git diff``-style text as (path, its part) pairs, in order; text before the first header is kept
    under the path ""."""
    out: list[tuple[str, list[str]]] = []
    for line in diff.splitlines(keepends=True):
        if line.startswith("diff --git a/"):
            path = line[len("diff --git a/") :].rstrip("\n").split(" b/", 1)[0]
            out.append((path, [line]))
        elif out:
            out[-1][1].append(line)
        else:
            out.append(("", [line]))
    return [(p, "".join(lines)) for p, lines in out]


def summarise_ignored(project: Path, diff: str) -> tuple[str, str]:
    """``diff`` without the parts of ignored files, and a one-line summary of those ("" when none)."""
    parts = split_files(diff)
    is_ignored = Ignored(project, [p for p, _ in parts if p])
    kept: list[tuple[str, str]] = []
    hidden: list[tuple[str, str]] = []
    for path, text in parts:
        (hidden if path and is_ignored(path) else kept).append((path, text))
    if not hidden:
        return diff, ""
    return "".join(t for _, t in kept), ignored_line([p for p, _ in hidden], is_ignored)


def ignored_line(paths: list[str], is_ignored: Ignored | None = None) -> str:
    """``+ 3 files git ignores (.pytest_cache/, src/__pycache__/): not shown``, each under the outermost
    directory that is ignored itself."""

    def group(p: str) -> str:
        parts = p.split("/")
        for k in range(1, len(parts)):
            d = "/".join(parts[:k])
            if is_ignored is not None and _dir_rule(is_ignored, d):
                return d + "/"
        return p

    tops = list(dict.fromkeys(group(p) for p in paths))
    shown = ", ".join(tops[:4]) + (", …" if len(tops) > 4 else "")
    n = len(paths)
    return f"+ {n} file{'s' * (n != 1)} git ignores ({shown}): not shown"


def _dir_rule(is_ignored: Ignored, d: str) -> bool:
    """Whether the directory ``d`` is ignored as a whole (a file directly in it and one deeper both are)."""
    return is_ignored(d + "/x") and is_ignored(d + "/x/y")


def effect_words(call: Any, project: Path | None) -> str:
    """A pending approval's effect (:meth:`PendingApproval.effect`) with the files git ignores in ``project``
    counted in one clause instead of listed (``wrote src/a.py; + 2 files git ignores (.pytest_cache/)``)."""
    files = call.files
    paths = [*files.written, *(d.rstrip("/") for d in files.deleted)]
    if project is None or not paths:
        return str(call.effect())
    is_ignored = Ignored(project, paths)
    hidden = [p for p in paths if is_ignored(p)]
    if not hidden:
        return str(call.effect())
    kept = replace(
        files,
        written=[p for p in files.written if not is_ignored(p)],
        deleted=[d for d in files.deleted if not is_ignored(d.rstrip("/"))],
    )
    ignored = ignored_line(hidden, is_ignored).rsplit(":", 1)[0].removeprefix("+ ")
    tail = "" if call.finished else " (so far: it was still running)"
    return (f"{kept.words()}; + {ignored}" if kept else f"wrote {ignored}") + tail
