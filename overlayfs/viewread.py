"""Reading the pure-Python merged view: file contents, stat, links, listings and walks of the merged tree,
each read of a lower file or directory recorded in the upper layer (what the conflict check compares).
:class:`overlayfs.view.Overlay` is one of these; its writes and its lifecycle are :mod:`overlayfs.view`'s."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator

from overlayfs.merged import Node, entries, join, kind_of, step
from overlayfs.viewbase import StrPath, ViewBase, path_error


class ViewReads(ViewBase):
    """The reading side of :class:`overlayfs.view.Overlay` (see there for the arguments)."""

    def read_bytes(self, path: StrPath) -> bytes:
        r, fresh = self._lookup(path)
        node = self._need(r, path)
        if node.kind == "dir":
            raise path_error(errno.EISDIR, path)
        if node.kind != "file":
            raise OSError(errno.EINVAL, "not a regular file", os.fsdecode(path))
        try:
            f = open(node.path, "rb")
        except OSError:
            if fresh:
                raise
            self._lookups.clear()  # the real tree changed under a cached lookup: walk again
            return self.read_bytes(path)
        with f:
            data = f.read()
            if node.upper is None and r.rel not in self._up.read:
                self._up.note_read(r.rel, os.fstat(f.fileno()), data)
        return data

    def read_text(self, path: StrPath, encoding: str = "utf-8", errors: str = "strict") -> str:
        return self.read_bytes(path).decode(encoding, errors)

    def exists(self, path: StrPath) -> bool:
        return self._try_node(path) is not None

    def is_file(self, path: StrPath) -> bool:
        node = self._try_node(path)
        return node is not None and node.kind == "file"

    def is_dir(self, path: StrPath) -> bool:
        node = self._try_node(path)
        return node is not None and node.kind == "dir"

    def is_symlink(self, path: StrPath) -> bool:
        try:
            node = self._resolve(path, follow=False).node
        except (FileNotFoundError, NotADirectoryError):
            return False
        return node is not None and node.kind == "symlink"

    def stat(self, path: StrPath, *, follow_symlinks: bool = True) -> os.stat_result:
        r, fresh = self._lookup(path, follow=follow_symlinks)
        node = self._need(r, path)
        if fresh and node.rel != ".":
            return node.st
        try:
            st = os.lstat(node.path)  # a cached lookup says where; what is there now is read afresh
        except OSError:
            st = None
        if st is None or kind_of(st.st_mode) != node.kind:  # the real tree changed under it: walk again
            self._lookups.clear()
            return self.stat(path, follow_symlinks=follow_symlinks)
        return st

    def lstat(self, path: StrPath) -> os.stat_result:
        return self.stat(path, follow_symlinks=False)

    def readlink(self, path: StrPath) -> str:
        node = self._need(self._resolve(path, follow=False), path)
        if node.kind != "symlink":
            raise path_error(errno.EINVAL, path)
        return os.readlink(node.path)

    def listdir(self, path: StrPath = ".") -> list[str]:
        node = self._need(self._resolve(path), path)
        if node.kind != "dir":
            raise path_error(errno.ENOTDIR, path)
        if node.lower is not None:
            self._up.note_dir_read(node.rel)
        return sorted(entries(node))

    def walk(self, path: StrPath = ".") -> Iterator[tuple[str, list[str], list[str]]]:
        """Top-down like ``os.walk``: (dirpath relative to the root, sorted dirnames, sorted filenames).

        Symlinks to directories are listed in dirnames but not descended; prune by editing dirnames.
        """
        top = self._rel(path)
        node = self._try_node(path)
        if node is None or node.kind != "dir":
            return
        stack: list[tuple[str, Node]] = [(top, node)]
        while stack:
            dirrel, node = stack.pop()
            try:
                ents = entries(node)
            except OSError:
                continue
            if node.lower is not None:
                self._up.note_dir_read(node.rel)
            dirs: list[str] = []
            files: list[str] = []
            links: set[str] = set()
            for name in sorted(ents):
                kind = ents[name]
                if kind == "symlink" and self._link_is_dir(join(node.rel, name)):
                    links.add(name)
                    kind = "dir"
                (dirs if kind == "dir" else files).append(name)
            yield dirrel, dirs, files
            for name in reversed(dirs):
                child = None if name in links else step(node, name)
                if child is not None and child.kind == "dir":
                    stack.append((join(dirrel, name), child))
