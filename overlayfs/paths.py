"""Resolving user-supplied paths to project-relative POSIX paths, refusing anything that leaves the root."""

from __future__ import annotations

import os
from pathlib import PurePosixPath

from overlayfs.errors import OverlayError


class PathEscapeError(OverlayError, PermissionError):
    """A path resolves outside the project root (``..``, an absolute path elsewhere, a symlink out)."""

    def __init__(self, path: object, root: object, why: str = "resolves outside the project root") -> None:
        super().__init__(f"{path!s}: {why} {root!s}")
        self.path = path
        self.root = root


def to_relative(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> str:
    """Lexically normalise ``path`` (relative to ``root`` or absolute inside it) to a relative POSIX path.

    Returns ``"."`` for the root itself. Symlinks are not followed here: callers that follow links check
    each link they follow with :func:`check_link_target`.
    """
    raw = os.fsdecode(path)
    if raw == "":
        raise FileNotFoundError(2, "empty path", raw)
    p = PurePosixPath(raw)
    if p.is_absolute():
        try:
            p = p.relative_to(PurePosixPath(os.fsdecode(root)))
        except ValueError:
            raise PathEscapeError(raw, root) from None
    parts: list[str] = []
    for part in p.parts:
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise PathEscapeError(raw, root)
            parts.pop()
        else:
            parts.append(part)
    return "/".join(parts) or "."


def check_link_target(root: str | os.PathLike[str], link_rel: str, target: str) -> str:
    """The project-relative path a symlink at ``link_rel`` points to; raises if it points outside root."""
    if os.path.isabs(target):
        return to_relative(root, target)
    parent = str(PurePosixPath(link_rel).parent)
    joined = target if parent == "." else f"{parent}/{target}"
    return to_relative(root, joined)
