"""The FUSE server's open handles and the requests made on them, beneath :class:`.ops.OverlayOps`.

:class:`HandleOps` keeps the tables of open file descriptors (``fh`` is the backing fd, remembered with its
node so that an unlinked but still open file survives until its last release) and of open directory
listings (snapshotted at ``opendir``), and answers the requests that name only a handle: ``read``,
``write``, ``fsync``, ``readdir`` and their releases. It also holds what every handler shares: stat to
``EntryAttributes`` with the cache timeouts, and :func:`guarded`, which turns any exception into a
FUSEError so that none ends ``pyfuse3.main()`` (the mount would answer ENOTCONN) and marks a write the
upper layer refused as full (:meth:`HandleOps.refused`).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import stat as stat_mod
from collections.abc import Callable
from typing import Any

import pyfuse3

from overlayfs import layer
from overlayfs.fuse.tree import MergedTree, Node

log = logging.getLogger("overlayfs.fuse")

# The daemon is the only writer of the view while mounted, so the kernel may cache for long.
TIMEOUT = 3600.0


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` as a pyfuse3 handler: a coroutine that raises nothing but FUSEError."""

    @functools.wraps(fn)
    async def handler(*args: Any) -> Any:
        try:
            return fn(*args)
        except pyfuse3.FUSEError:
            raise
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                args[0].refused()
            raise pyfuse3.FUSEError(e.errno or errno.EIO) from None
        except Exception:
            log.exception("%s%r failed", fn.__name__, args[1:])
            raise pyfuse3.FUSEError(errno.EIO) from None

    return handler


def fuse_error(code: int) -> pyfuse3.FUSEError:
    return pyfuse3.FUSEError(code)


def entry_attributes(node: Node, st: os.stat_result) -> pyfuse3.EntryAttributes:
    a = pyfuse3.EntryAttributes()
    a.st_ino = node.ino
    a.generation = 0
    a.entry_timeout = TIMEOUT
    # A hard-linked file has one inode per name here: no attribute caching keeps the names coherent.
    a.attr_timeout = TIMEOUT if st.st_nlink <= 1 or stat_mod.S_ISDIR(st.st_mode) else 0
    a.st_mode = st.st_mode
    a.st_nlink = st.st_nlink
    a.st_uid = st.st_uid
    a.st_gid = st.st_gid
    a.st_rdev = st.st_rdev
    a.st_size = st.st_size
    a.st_blksize = st.st_blksize
    a.st_blocks = st.st_blocks
    a.st_atime_ns = st.st_atime_ns
    a.st_mtime_ns = st.st_mtime_ns
    a.st_ctime_ns = st.st_ctime_ns
    return a


class HandleOps(pyfuse3.Operations):
    """The handle tables of a server for ``tree`` and the handlers on open handles (unguarded: see ops)."""

    def __init__(self, tree: MergedTree) -> None:
        super().__init__()
        self.tree = tree
        self._fds: dict[int, Node] = {}
        self._dirs: dict[int, list[tuple[str, bool]]] = {}
        self._dir_nodes: dict[int, Node] = {}
        self._next_dh = 1

    # -- directories ---------------------------------------------------------------------------------
    def opendir(self, inode: int, ctx: pyfuse3.RequestContext) -> int:
        node = self.tree.get(inode)
        dh = self._next_dh
        self._next_dh += 1
        self._dirs[dh] = self.tree.listing(node)
        self._dir_nodes[dh] = node
        return dh

    def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        entries, parent = self._dirs[fh], self._dir_nodes[fh]
        for i in range(start_id, len(entries)):
            hit = self.tree.child(parent, entries[i][0])
            if hit is None:  # removed since opendir
                continue
            node, st = hit
            if not pyfuse3.readdir_reply(token, os.fsencode(node.name), entry_attributes(node, st), i + 1):
                return
            node.lookups += 1

    def releasedir(self, fh: int) -> None:
        self._dirs.pop(fh, None)
        self._dir_nodes.pop(fh, None)

    def fsyncdir(self, fh: int, datasync: bool) -> None:
        return None

    # -- files ---------------------------------------------------------------------------------------
    def _fh(self, node: Node, fd: int, st: os.stat_result | None = None) -> pyfuse3.FileInfo:
        self._fds[fd] = node
        node.fds.add(fd)
        return pyfuse3.FileInfo(fh=fd, keep_cache=(st or os.fstat(fd)).st_nlink <= 1)

    def read(self, fh: int, off: int, size: int) -> bytes:
        return os.pread(fh, size, off)

    def write(self, fh: int, off: int, buf: bytes) -> int:
        n = os.pwrite(fh, buf, off)
        if n < len(buf):  # a short write is the filesystem running out of room: the next one is refused
            self.refused()
        return n

    def refused(self) -> None:
        """The upper layer's filesystem refused a write as full: leave the mark the sandbox's runner reads."""
        with contextlib.suppress(OSError):
            os.close(os.open(self.tree.metadir / layer.REFUSED_FILE, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC,
                             0o600))

    def flush(self, fh: int) -> None:
        raise fuse_error(errno.ENOSYS)  # nothing buffered here; ENOSYS stops further flush requests

    def release(self, fh: int) -> None:
        node = self._fds.pop(fh, None)
        os.close(fh)
        if node is not None:
            node.fds.discard(fh)
            if node.parent is None and node is not self.tree.root:
                self.tree.detach(node)

    def fsync(self, fh: int, datasync: bool) -> None:
        if datasync:
            os.fdatasync(fh)
        else:
            os.fsync(fh)
