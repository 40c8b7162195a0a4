"""``@path`` imports in instructions files, as Claude Code expands them.

A word starting with ``@`` (at the start of a line or after whitespace) names a file: relative to the
importing file's directory, ``~/`` for the home directory, or absolute. Not inside code: fenced blocks and
inline code spans are skipped. An imported file may import others; chains stop at :data:`MAX_DEPTH` imports
below a loaded file (Claude Code's documented "five hops" counts the loaded file: with 2.1.332 a chain
CLAUDE.md → one → two → three → four is loaded and four's own import is not). A missing file is skipped
silently; a file already loaded is not loaded again (so cycles end). A project file's imports must stay inside
the project: Claude Code asks the user before it reads an external one, and speculate has no such prompt, so
it leaves them out with a note.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Literal

Scope = Literal["user", "project", "local"]
MAX_DEPTH = 4
_FENCE_RE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
_SPAN_RE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
_IMPORT_RE = re.compile(r"(?:^|(?<=\s))@((?:[^\s\\]|\\ )+)", re.M)
_TRAILING = ".,;:!?)]}'\""


def import_refs(text: str) -> list[str]:
    """The ``@path`` references of ``text``, outside code, in order."""
    prose = _SPAN_RE.sub(" ", _FENCE_RE.sub(" ", text))
    return [m.group(1).replace("\\ ", " ") for m in _IMPORT_RE.finditer(prose)]


def resolve(ref: str, base: Path) -> Path:
    if ref == "~" or ref.startswith("~/"):
        return Path.home() / ref[2:]
    return Path(os.path.normpath(base / ref))


def _under(path: Path, top: Path) -> bool:
    real, root = os.path.realpath(path), os.path.realpath(top)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def expand(
    path: Path,
    text: str,
    *,
    read: Callable[[Path], str | None],
    seen: set[str],
    inside: Path | None,
    notes: list[str],
    depth: int = 0,
    by: Path | None = None,
) -> list[tuple[Path, str, Path | None]]:
    """``path`` with ``text``, then what it imports, depth first: (path, text, imported by) for each file not in
    ``seen`` (realpaths, updated). ``inside``: imports must stay under it (None: anywhere)."""
    real = os.path.realpath(path)
    if real in seen:
        return []
    seen.add(real)
    out: list[tuple[Path, str, Path | None]] = [(path, text, by)]
    if depth >= MAX_DEPTH:
        return out
    for ref in import_refs(text):
        target = resolve(ref, path.parent)
        body = read(target)
        if body is None and ref.rstrip(_TRAILING) != ref:  # "see @docs/a.md." in a sentence
            target = resolve(ref.rstrip(_TRAILING), path.parent)
            body = read(target)
        if body is None:
            continue
        if inside is not None and not _under(target, inside):
            notes.append(
                f"{path}: @{ref} is outside the project: not imported (Claude Code asks the user first)"
            )
            continue
        out += expand(
            target, body, read=read, seen=seen, inside=inside, notes=notes, depth=depth + 1, by=path
        )
    return out
