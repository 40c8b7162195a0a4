"""The FUSE server's reads, writes and listings, beneath :class:`.ops.OverlayOps`.

:class:`HandleOps` answers the requests on a file's contents (``read``, ``write``, ``fsync``) through the
node's descriptors (:mod:`overlayfs.fuse.files`: the kernel sends no OPEN or CREATE, so there are no
handles), and lists directories (``readdir``: one merged listing per pass). It
also holds what every handler shares: stat to ``EntryAttributes`` with the cache timeouts, and
:func:`guarded`, which turns any exception into a FUSEError (the request loop answers it with the errno;
anything else is logged and is EIO) and marks a write the upper layer refused as full
(:meth:`HandleOps.refused`).
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

from overlayfs import layer
from overlayfs.fuse.files import Files
from overlayfs.fuse.tree import MergedTree, Node
from overlayfs.fuse.wire import FUSEError, ReaddirToken, StatEntry, dirent_reply, readdir_reply

log = logging.getLogger("overlayfs.fuse")

# The daemon is the only writer of the view while mounted, so the kernel may cache for long.
TIMEOUT = 3600.0


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` as a handler that raises nothing but FUSEError (the request loop answers it)."""

    @functools.wraps(fn)
    def handler(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except FUSEError:
            raise
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                args[0].refused()
            raise FUSEError(e.errno or errno.EIO) from None
        except Exception:
            log.exception("%s%r failed", fn.__name__, args[1:])
            raise FUSEError(errno.EIO) from None

    return handler


def fuse_error(code: int) -> FUSEError:
    return FUSEError(code)


def entry_attributes(node: Node, st: os.stat_result) -> StatEntry:
    # A hard-linked file has one inode per name here: no attribute caching keeps the names coherent.
    return StatEntry(
        node.ino, st, TIMEOUT, TIMEOUT if st.st_nlink <= 1 or stat_mod.S_ISDIR(st.st_mode) else 0
    )


class HandleOps:
    """The per-node descriptors of a server for ``tree`` (:class:`overlayfs.fuse.files.Files`) and the
    handlers that read, write and list (unguarded: see ops). The kernel sends no OPEN, OPENDIR or CREATE
    (each answered ENOSYS once): READ, WRITE and READDIRPLUS name the node, and there are no handles."""

    def __init__(self, tree: MergedTree) -> None:
        self.tree = tree
        self.files = Files(tree)
        # How a listing entry is added to a reply: the own transport packs it here; pyfuse3's transport
        # sets its own (libfuse packs the entry).
        self.readdir_reply: Callable[[Any, bytes, StatEntry, int], bool] = readdir_reply

    # -- the file a request on a node acts on --------------------------------------------------------
    def where(self, node: Node) -> str | int:
        """What to read ``node``'s metadata (xattrs) from: its backing file's path, or for a node whose name
        was removed the descriptor kept for it (ENOENT where none was: never another file's path)."""
        if node.parent is not None or node is self.tree.root:
            return self.tree.backing(node)
        fd = self.files.any(node)
        if fd is None:
            raise FUSEError(errno.ENOENT)
        return fd

    def changing(self, node: Node) -> str | int:
        """What to change ``node``'s metadata on: its upper file's path (copied up, base recorded, first),
        or for a node whose name was removed a kept descriptor of its upper file (ENOENT where there is
        none: a lower file is the real project's)."""
        if node.parent is not None or node is self.tree.root:
            self.tree.copy_up(node)
            self.tree.touch(node)
            return self.tree.upath(node)
        fd = self.files.upper(node)
        if fd is None:
            raise FUSEError(errno.ENOENT)
        return fd

    # -- directories ---------------------------------------------------------------------------------
    def readdir(self, inode: int, start_id: int, token: ReaddirToken) -> None:
        node = self.tree.get(inode)
        if start_id == 0 or node.listing is None:  # a listing is made once per pass (as at opendir)
            node.listing = self.tree.listing(node)
        entries = node.listing
        paths = self.tree.dir_paths(node)
        for i in range(start_id, len(entries)):
            hit = self.tree.child(node, entries[i][0], paths)
            if hit is None:  # removed since the pass began
                continue
            kid, st = hit
            if not self.readdir_reply(token, os.fsencode(kid.name), entry_attributes(kid, st), i + 1):
                return
            kid.lookups += 1
        node.listing = None  # the pass is over

    def readdir_names(self, inode: int, start_id: int, token: ReaddirToken) -> None:
        """A plain READDIR (the kernel sends READDIRPLUS here; an older or differently configured one may
        not): the same entries, names and types only. The kernel makes no dentry of them, so no lookup is
        counted and no node is added for a name not yet in the table (its backing inode number stands in)."""
        node = self.tree.get(inode)
        if start_id == 0 or node.listing is None:
            node.listing = self.tree.listing(node)
        entries = node.listing
        upath, lpath = self.tree.dir_paths(node)
        for i in range(start_id, len(entries)):
            name, in_upper = entries[i]
            kid = node.kids.get(name)
            try:
                st = os.lstat(f"{upath if in_upper else lpath}/{name}")
            except OSError:  # removed since the pass began
                continue
            ino = kid.ino if kid is not None else st.st_ino
            if not dirent_reply(token, os.fsencode(name), ino, st.st_mode, i + 1):
                return
        node.listing = None

    # -- files ---------------------------------------------------------------------------------------
    def read(self, inode: int, off: int, size: int) -> bytes:
        return os.pread(self.files.reader(self.tree.get(inode)), size, off)

    def write(self, inode: int, off: int, buf: bytes | memoryview) -> int:
        n = os.pwrite(self.files.writer(self.tree.get(inode)), buf, off)
        if n < len(buf):  # a short write is the filesystem running out of room: the next one is refused
            self.refused()
        return n

    def refused(self) -> None:
        """The upper layer's filesystem refused a write as full: leave the mark the sandbox's runner reads."""
        with contextlib.suppress(OSError):
            os.close(
                os.open(
                    self.tree.metadir / layer.REFUSED_FILE, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600
                )
            )

    def fsync(self, inode: int, datasync: bool) -> None:
        fd = self.files.any(self.tree.get(inode))
        if fd is None:
            return  # nothing written through this server that a descriptor holds: the data is on disk
        if datasync:
            os.fdatasync(fd)
        else:
            os.fsync(fd)
