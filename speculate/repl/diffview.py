"""A diff as a person reads it: the files git ignores (``.gitignore`` files, ``.git/info/exclude``), such as
``.pytest_cache/`` and ``__pycache__/*.pyc`` a test run leaves, summarised in one line instead of shown as
hunks (``/diff``, ``/diff last`` and the acceptance question's list)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pathspec


def _patterns(project: Path, rel_dir: str) -> list[str]:
    """The ignore patterns of ``rel_dir``'s .gitignore, rewritten relative to the project."""
    f = project / rel_dir / ".gitignore" if rel_dir else project / ".gitignore"
    try:
        lines = f.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    if not rel_dir:
        return lines
    out = []
    for ln in lines:
        s = ln.strip()
        if not s or s.startswith("#"):
            continue
        neg, s = ("!", s[1:]) if s.startswith("!") else ("", s)
        anchored = "/" in s.rstrip("/")
        out.append(f"{neg}{rel_dir}/{s.lstrip('/')}" if anchored else f"{neg}{rel_dir}/**/{s}")
    return out


class Ignored:
    """Which project-relative paths git would ignore here (read once per diff)."""

    def __init__(self, project: Path, paths: Iterable[str]) -> None:
        lines: list[str] = []
        try:
            lines += (project / ".git" / "info" / "exclude").read_text(errors="replace").splitlines()
        except OSError:
            pass
        dirs = {""}
        for p in paths:
            parts = p.split("/")[:-1]
            dirs.update("/".join(parts[: i + 1]) for i in range(len(parts)))
        for d in sorted(dirs, key=lambda d: (d.count("/"), d)):
            lines += _patterns(project, d)
        self.spec = pathspec.PathSpec.from_lines("gitwildmatch", lines)

    def __call__(self, path: str) -> bool:
        return self.spec.match_file(path)


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
