"""The descriptors the FUSE server reads and writes files through: opened on demand per node, not per open.

The server answers the kernel's first OPEN (and OPENDIR) with ENOSYS, which tells the kernel to send no more
of them, nor their RELEASE: reading a small file through the mount then costs one request (READ) instead
of three (OPEN, READ, RELEASE). A READ or WRITE names the node; :class:`Files` keeps a descriptor per node
for each (the lower or upper file for reading, the upper one for writing, copied up at the first write),
the most recently used :data:`MAX_CACHED` of them open. A name about to be removed while the kernel still
holds its node (a file unlinked while open) gets its descriptors opened first and kept until the kernel
forgets the node, so it stays readable and writable as on a real filesystem; a node whose name is gone is
changed only through a descriptor of its upper file, never its lower one (the real project's).

No open here can block: only regular files are kept (a FIFO's ``open(O_RDONLY)`` would wait for a writer
that could only come through this mount, under the lock the server answers every request with), and
every open is ``O_NONBLOCK | O_NOFOLLOW`` (a file swapped for a FIFO or a symlink meanwhile fails instead).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat as stat_mod
from collections import OrderedDict

from overlayfs.fuse.tree import ROOT_INO, MergedTree, Node

MAX_CACHED = 512  # nodes with open descriptors (a first pass over 5k files would otherwise hold 5k)
_OPEN = os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW


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
            os.O_RDONLY | _OPEN,
        )
        if not node.upper:
            st = os.fstat(fd)
            if stat_mod.S_ISREG(st.st_mode):
                try:
                    tree.note_read(rel, st)
                except OSError:  # no room to record it (the layer's bound): not read then
                    os.close(fd)
                    raise
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
        node.wfd = os.open(self.tree.upath(node), os.O_WRONLY | _OPEN)
        self._remember(node)
        return node.wfd

    def any(self, node: Node) -> int | None:
        """An open descriptor of ``node``, if it has one (an unlinked node is reached only through it)."""
        for fd in (node.wfd, node.rfd):
            if fd >= 0:
                return fd
        return None

    def upper(self, node: Node) -> int | None:
        """A kept descriptor of ``node``'s upper file: what changes a node whose name is gone."""
        if node.wfd >= 0:
            return node.wfd
        return node.rfd if node.rfd >= 0 and node.rfd_upper else None

    def stat_gone(self, node: Node) -> os.stat_result:
        """The attributes of a node whose name is gone: its kept descriptor's, else its lstat at removal."""
        fd = self.any(node)
        if fd is not None:
            return os.fstat(fd)
        if node.gone is None:
            raise OSError(errno.ENOENT, "the node's name was removed")
        return node.gone

    def keep(self, node: Node, st: os.stat_result) -> None:
        """``node`` (whose lstat is ``st``) is about to lose its name while the kernel holds it: remember its
        attributes (and a symlink's target), and for a regular file open what it will be read and written
        through from now on, kept until the kernel forgets the node. Nothing else is opened (see above)."""
        if node.lookups <= 0:
            return
        node.gone = st
        if stat_mod.S_ISLNK(st.st_mode):
            with contextlib.suppress(OSError):
                node.link = os.readlink(os.fsencode(self.tree.backing(node)))
        if not stat_mod.S_ISREG(st.st_mode):
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
