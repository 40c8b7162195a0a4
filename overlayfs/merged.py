"""Lookups in the merged view of a lower and an upper directory, straight from disk.

No cache of the upper layer is kept: every lookup ``lstat``s the upper and lower entries, so what a mounted
backend writes into the same upper directory is seen at once. Paths are project-relative POSIX strings
(``"."`` for the root) as produced by :func:`overlayfs.paths.to_relative`.
"""

from __future__ import annotations

import errno
import os
import stat as stat_mod
from dataclasses import dataclass

from overlayfs.layer import is_opaque, is_whiteout_at
from overlayfs.paths import check_link_target

MAX_LINKS = 40  # the kernel's limit on symlinks followed in one resolution


def kind_of(mode: int) -> str:
    if stat_mod.S_ISREG(mode):
        return "file"
    if stat_mod.S_ISDIR(mode):
        return "dir"
    if stat_mod.S_ISLNK(mode):
        return "symlink"
    return "other"


def lstat_or_none(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def join(rel: str, name: str) -> str:
    return name if rel == "." else f"{rel}/{name}"


def parent_of(rel: str) -> tuple[str, str]:
    """Split ``"a/b/c"`` into ``("a/b", "c")``; the parent of a top-level name is ``"."``."""
    head, _, tail = rel.rpartition("/")
    return (head or "."), tail


@dataclass(frozen=True, slots=True)
class Node:
    """One entry of the merged view.

    For a non-directory exactly one of ``upper``/``lower`` is set: the entry that serves it. For a directory
    ``upper`` is its upper directory (if any) and ``lower`` the lower directory merged beneath it (None when
    the upper one is opaque or replaced a non-directory).
    """

    rel: str
    kind: str  # "file" | "dir" | "symlink" | "other"
    upper: str | None
    lower: str | None
    st: os.stat_result  # lstat of the serving entry (the upper one when both exist)

    @property
    def path(self) -> str:
        path = self.upper if self.upper is not None else self.lower
        if path is None:
            raise ValueError(f"{self.rel}: a merged entry in neither layer")
        return path


def root_node(lower: str, upper: str) -> Node:
    return Node(".", "dir", upper, lower, os.lstat(upper))


def step(parent: Node, name: str) -> Node | None:
    """The merged entry ``name`` inside directory ``parent`` (no symlink following), or None."""
    rel = join(parent.rel, name)
    udir, ldir = parent.upper, parent.lower
    ust = None
    if udir is not None:
        up = f"{udir}/{name}"
        ust = lstat_or_none(up)
        if ust is not None:
            if is_whiteout_at(up, ust):
                return None
            if not stat_mod.S_ISDIR(ust.st_mode):
                return Node(rel, kind_of(ust.st_mode), up, None, ust)
    lst = None
    if ldir is not None:
        lp = f"{ldir}/{name}"
        lst = lstat_or_none(lp)
    if ust is not None:  # an upper directory, merged with a lower one unless opaque
        merged = lst is not None and stat_mod.S_ISDIR(lst.st_mode) and not is_opaque(up)
        return Node(rel, "dir", up, lp if merged else None, ust)
    if lst is None:
        return None
    return Node(rel, kind_of(lst.st_mode), None, lp, lst)


@dataclass(frozen=True, slots=True)
class Resolved:
    """Result of resolving a path: its canonical form (no symlinks), the node (None: absent), its parent."""

    rel: str
    node: Node | None
    parent: Node


def resolve(root: Node, project_root: str, rel: str, *, follow_last: bool = True) -> Resolved:
    """Resolve ``rel`` in the merged view, following symlinks (the last one only if ``follow_last``).

    Raises FileNotFoundError / NotADirectoryError for a missing or non-directory intermediate component,
    OSError(ELOOP) for link loops and PathEscapeError for a link pointing outside the project.
    """
    parts = [] if rel == "." else rel.split("/")
    links = 0
    i = 0
    node = root
    parent = root
    while i < len(parts):
        name = parts[i]
        if node.kind != "dir":
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), rel)
        child = step(node, name)
        last = i == len(parts) - 1
        if child is None:
            if last:
                return Resolved(join(node.rel, name), None, node)
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), rel)
        if child.kind == "symlink" and (follow_last or not last):
            links += 1
            if links > MAX_LINKS:
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), rel)
            target = check_link_target(project_root, child.rel, os.readlink(child.path))
            parts = ([] if target == "." else target.split("/")) + parts[i + 1 :]
            i, node, parent = 0, root, root
            continue
        parent, node = node, child
        i += 1
    return Resolved(node.rel, node, parent)


def entries(node: Node) -> dict[str, str]:
    """The merged listing of directory ``node``: name -> kind of the serving entry (unsorted)."""
    out: dict[str, str] = {}
    hidden: set[str] = set()
    if node.upper is not None:
        with os.scandir(node.upper) as it:
            for e in it:
                name = e.name
                kind = _entry_kind(e)
                if kind in ("other", "file") and _whiteout_entry(e):
                    hidden.add(name)
                else:
                    out[name] = kind
    if node.lower is not None:
        with os.scandir(node.lower) as it:
            for e in it:
                name = e.name
                if name in out or name in hidden:
                    continue
                out[name] = _entry_kind(e)
    return out


def _whiteout_entry(e: os.DirEntry[str]) -> bool:
    try:
        return is_whiteout_at(e.path, e.stat(follow_symlinks=False))
    except FileNotFoundError:
        return False


def _entry_kind(e: os.DirEntry[str]) -> str:
    if e.is_dir(follow_symlinks=False):
        return "dir"
    if e.is_symlink():
        return "symlink"
    if e.is_file(follow_symlinks=False):
        return "file"
    return "other"
