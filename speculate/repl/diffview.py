"""A diff as a person reads it: the files git ignores (``.gitignore`` files, ``.git/info/exclude``), such as
``.pytest_cache/`` and ``__pycache__/*.pyc`` a test run leaves, summarised in one line instead of shown as
hunks (``/diff``, ``/diff last`` and the acceptance question's list)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

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
    return "".join(t for _, t in kept), ignored_line([p for p, _ in hidden])


def ignored_line(paths: list[str]) -> str:
    """``+ 3 ignored files (.pytest_cache/, __pycache__/): not shown`` — grouped by their top directory."""
    tops = list(dict.fromkeys(p.split("/", 1)[0] + ("/" if "/" in p else "") for p in paths))
    shown = ", ".join(tops[:4]) + (", …" if len(tops) > 4 else "")
    n = len(paths)
    return f"+ {n} file{'s' * (n != 1)} git ignores ({shown}): not shown"
