"""The descriptors the FUSE server reads and writes files through: opened on demand per node, not per open.

The server answers the kernel's first OPEN (and OPENDIR) with ENOSYS, which tells the kernel to send no more
of them, nor their RELEASE: reading a small file through the mount then costs one request (READ) instead
of three (OPEN, READ, RELEASE). A READ or WRITE names the node; :class:`Files` keeps a descriptor per node
for each (the lower or upper file for reading, the upper one for writing, copied up at the first write),
the most recently used :data:`MAX_CACHED` of them open. A name about to be removed while the kernel still
holds its node (a file unlinked while open) gets its descriptors opened first and kept until the kernel
forgets the node, so it stays readable and writable as on a real filesystem.
"""

from __future__ import annotations

import errno
import os
import stat as stat_mod
from collections import OrderedDict

from overlayfs.fuse.tree import ROOT_INO, MergedTree, Node

MAX_CACHED = 512  # nodes with open descriptors (a first pass over 5k files would otherwise hold 5k)


class Files:
    """Per-node descriptors of ``tree``'s files."""

    def __init__(self, tree: MergedTree) -> None:
        self.tree = tree
        self._recent: OrderedDict[int, Node] = OrderedDict()
        tree.on_forget = self.close

    def reader(self, node: Node) -> int:
        """A descriptor to read ``node`` from; the first read of a lower file goes into the read set."""
        if node.rfd >= 0 and node.rfd_upper == node.upper:
            if node.ino in self._recent:
                self._recent.move_to_end(node.ino)
            return node.rfd
        if node.rfd >= 0:  # opened on the lower file before a copy-up: the upper one serves it now
            os.close(node.rfd)
            node.rfd = -1
        self._check_named(node)
        tree = self.tree
        rel = tree.rel(node)
        fd = os.open(
            f"{tree.upper_s if node.upper else tree.lower_s}/{rel}" if rel else tree.upper_s,
            os.O_RDONLY | os.O_CLOEXEC,
        )
        if not node.upper:
            st = os.fstat(fd)
            if stat_mod.S_ISREG(st.st_mode):
                tree.note_read(rel, st)
        node.rfd, node.rfd_upper = fd, node.upper
        self._remember(node)
        return fd

    def writer(self, node: Node) -> int:
        """A descriptor to write ``node`` through (copied up, its base recorded, first)."""
        if node.wfd >= 0:
            return node.wfd
        self._check_named(node)
        if not node.upper:
            self.tree.copy_up(node)
        self.tree.touch(node)
        node.wfd = os.open(self.tree.upath(node), os.O_WRONLY | os.O_CLOEXEC)
        self._remember(node)
        return node.wfd

    def any(self, node: Node) -> int | None:
        """An open descriptor of ``node``, if it has one (an unlinked node is reached only through it)."""
        for fd in (node.wfd, node.rfd):
            if fd >= 0:
                return fd
        return None

    def keep(self, node: Node) -> None:
        """``node``'s name is about to go while the kernel holds the node: open what it will be read and
        written through from now on, and keep it until the kernel forgets the node."""
        if node.is_dir or node.lookups <= 0:
            return
        for opener in (self.reader, self.writer) if node.upper else (self.reader,):
            try:
                opener(node)
            except OSError:  # not readable or writable by the server: so it stays
                pass
        node.kept = True
        self._recent.pop(node.ino, None)

    def close(self, node: Node) -> None:
        """Close ``node``'s descriptors (it was forgotten, or evicted)."""
        for attr in ("rfd", "wfd"):
            fd = getattr(node, attr)
            if fd >= 0:
                os.close(fd)
                setattr(node, attr, -1)
        self._recent.pop(node.ino, None)

    def _check_named(self, node: Node) -> None:
        if node.parent is None and node.ino != ROOT_INO:  # removed, and nothing was kept open for it
            raise OSError(errno.ENOENT, "stale inode")

    def _remember(self, node: Node) -> None:
        if node.kept:
            return
        self._recent[node.ino] = node
        self._recent.move_to_end(node.ino)
        while len(self._recent) > MAX_CACHED:
            _, old = self._recent.popitem(last=False)
            self.close(old)
