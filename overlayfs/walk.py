"""Walking a layer's tree by descriptor, however deep a command made it.

A command can make a tree deeper than PATH_MAX (``mkdir d && cd d``, relative, as often as it likes); a scan
that names each directory by its full path string then fails with ENAMETOOLONG, and an uncaught one ended
the session. :func:`walk` opens each directory relative to the root's descriptor and lists it through its
own (``scandir(fd)``, ``DirEntry.stat`` is an ``fstatat``), so nothing it names is longer than the path
relative to the root, and it is iterative (no recursion limit). A directory whose relative path is itself
PATH_MAX or longer cannot be opened by any path: it is skipped with what is beneath it, and
:attr:`Walk.deep` names the first one. What such a path holds can be neither shown nor promoted:
:mod:`overlayfs.changes` turns it into :class:`overlayfs.errors.HostPathTooLong`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

PATH_MAX = os.pathconf("/", "PC_PATH_MAX") if hasattr(os, "pathconf") else 4096  # bytes, its NUL included
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW


def too_long(path: str) -> bool:
    """Whether no syscall can take ``path`` (PATH_MAX counts the terminating NUL)."""
    return len(path) >= PATH_MAX // 4 and len(os.fsencode(path)) >= PATH_MAX


class Walk:
    """Iterate :meth:`dirs` once; afterwards :attr:`deep` is the first directory skipped as too deep."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = os.fspath(root)
        self.deep: str | None = None

    def dirs(self) -> Iterator[tuple[str, int, list[os.DirEntry[str]]]]:
        """Each directory, the root (``""``) first, depth-first: its path relative to the root, a descriptor
        open on it while the caller looks (``dir_fd`` for its entries' names), and its entries. A directory
        that vanished meanwhile is skipped; an unreadable root raises."""
        rootfd = os.open(self.root, _DIR)
        try:
            stack = [""]
            while stack:
                rel = stack.pop()
                try:
                    fd = os.open(rel, _DIR, dir_fd=rootfd) if rel else rootfd
                except (FileNotFoundError, NotADirectoryError):
                    continue
                try:
                    with os.scandir(fd) as it:
                        entries = list(it)
                    yield rel, fd, entries
                finally:
                    if fd != rootfd:
                        os.close(fd)
                for e in entries:
                    if e.is_dir(follow_symlinks=False):
                        child = f"{rel}/{e.name}" if rel else e.name
                        if too_long(child):
                            self.deep = self.deep or child
                        else:
                            stack.append(child)
        finally:
            os.close(rootfd)


def at(fd: int, name: str) -> str:
    """A short path naming entry ``name`` of the directory open as ``fd`` (for the calls that take no
    ``dir_fd``: getxattr and the like), whatever that directory's own path is."""
    return f"/proc/self/fd/{fd}/{name}"
