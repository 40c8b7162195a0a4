"""The pyfuse3 transport: the operations of :class:`overlayfs.fuse.ops.OverlayOps` served through libfuse by
pyfuse3 on trio, the design card's transport and the fallback where the kernel lacks what the own transport
(:mod:`overlayfs.fuse.server`) relies on.

The operations answer without handles (the own transport answers OPEN, OPENDIR and CREATE with ENOSYS, and
the kernel stops asking). libfuse cannot answer so, and pyfuse3 wants a handle from each, so
:class:`Adapter` gives the node's inode number as its handle: READ, WRITE, FSYNC and READDIRPLUS then name
the node as on the own transport, RELEASE has nothing to close (descriptors are per node, closed when the
kernel forgets it), CREATE is the MKNOD the kernel sends the own transport. libfuse asks for atomic O_TRUNC,
so a truncating open arrives as an OPEN with ``O_TRUNC``, served as the SETATTR the own transport receives.
Each request is served under :attr:`Adapter.lock`, as the own loop serves it, so the owner's control channel
(another thread) changes the tree only between requests. The handlers never wait on trio: one worker task
serves the requests in order (``max_tasks=1``; more would only be started and stopped again).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import signal
import stat as stat_mod
import threading
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

import pyfuse3
import trio

from overlayfs.fuse import wire
from overlayfs.fuse.ops import OverlayOps
from overlayfs.fuse.trace import Trace

log = logging.getLogger("overlayfs.fuse")
_STAT_FIELDS = (
    "st_mode",
    "st_nlink",
    "st_uid",
    "st_gid",
    "st_rdev",
    "st_size",
    "st_blksize",
    "st_blocks",
    "st_atime_ns",
    "st_mtime_ns",
    "st_ctime_ns",
)


def entry(e: Any) -> pyfuse3.EntryAttributes:
    """An operation's answer (:class:`wire.StatEntry` or :class:`wire.EntryAttributes`) as pyfuse3's."""
    out = pyfuse3.EntryAttributes()
    out.st_ino, out.entry_timeout, out.attr_timeout = e.st_ino, e.entry_timeout, e.attr_timeout
    src = getattr(e, "st", e)  # a StatEntry carries the backing file's stat_result
    for f in _STAT_FIELDS:
        setattr(out, f, getattr(src, f))
    return out


def _served(opcode: str) -> Callable[[Callable[..., Any]], Callable[..., Coroutine[Any, Any, Any]]]:
    """A synchronous handler as pyfuse3's coroutine: under the lock, noted in the trace, and raising
    nothing but pyfuse3's FUSEError (anything else would end ``pyfuse3.main``: a dead mount)."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Coroutine[Any, Any, Any]]:
        @functools.wraps(fn)
        async def handler(self: Adapter, *args: Any) -> Any:
            if self.trace is not None:
                self.trace.note(opcode)
            try:
                with self.lock:
                    return fn(self, *args)
            except pyfuse3.FUSEError:
                raise
            except wire.FUSEError as e:
                raise pyfuse3.FUSEError(e.errno) from None
            except OSError as e:
                raise pyfuse3.FUSEError(e.errno or errno.EIO) from None
            except Exception:
                log.exception("%s%r failed", fn.__name__, args)
                raise pyfuse3.FUSEError(errno.EIO) from None

        return handler

    return wrap


class Adapter(pyfuse3.Operations):
    """pyfuse3's ``Operations`` for ``ops``; a handle is the inode number of the node it opens."""

    enable_writeback_cache = False  # as the own transport: it hurts small appends

    def __init__(self, ops: OverlayOps, trace: Trace | None = None) -> None:
        super().__init__()
        self.ops, self.trace = ops, trace
        self.lock = threading.Lock()
        ops.readdir_reply = self._readdir_reply
        ops.invalidate_inode, ops.invalidate_entry = _invalidate_inode, _invalidate_entry

    @staticmethod
    def _readdir_reply(token: Any, name: bytes, attrs: Any, next_id: int) -> bool:
        return bool(pyfuse3.readdir_reply(token, name, entry(attrs), next_id))

    def init(self) -> None:
        if self.trace is not None:
            self.trace.note("INIT")

    # -- inodes and names: the operations, their answers converted ----------------------------------
    @_served("LOOKUP")
    def lookup(self, parent_inode: int, name: bytes, ctx: Any) -> pyfuse3.EntryAttributes:
        return entry(self.ops.lookup(parent_inode, name, ctx))

    @_served("FORGET")
    def forget(self, inode_list: Sequence[tuple[int, int]]) -> None:
        self.ops.forget(inode_list)

    @_served("GETATTR")
    def getattr(self, inode: int, ctx: Any) -> pyfuse3.EntryAttributes:
        return entry(self.ops.getattr(inode, ctx))

    @_served("SETATTR")
    def setattr(
        self, inode: int, attr: Any, fields: Any, fh: int | None, ctx: Any
    ) -> pyfuse3.EntryAttributes:
        return entry(self.ops.setattr(inode, attr, fields, fh, ctx))

    @_served("READLINK")
    def readlink(self, inode: int, ctx: Any) -> bytes:
        return self.ops.readlink(inode, ctx)

    @_served("MKNOD")
    def mknod(
        self, parent_inode: int, name: bytes, mode: int, rdev: int, ctx: Any
    ) -> pyfuse3.EntryAttributes:
        return entry(self.ops.mknod(parent_inode, name, mode, rdev, ctx))

    @_served("MKDIR")
    def mkdir(self, parent_inode: int, name: bytes, mode: int, ctx: Any) -> pyfuse3.EntryAttributes:
        return entry(self.ops.mkdir(parent_inode, name, mode, ctx))

    @_served("SYMLINK")
    def symlink(self, parent_inode: int, name: bytes, target: bytes, ctx: Any) -> pyfuse3.EntryAttributes:
        return entry(self.ops.symlink(parent_inode, name, target, ctx))

    @_served("LINK")
    def link(self, inode: int, new_parent_inode: int, new_name: bytes, ctx: Any) -> pyfuse3.EntryAttributes:
        return entry(self.ops.link(inode, new_parent_inode, new_name, ctx))

    @_served("UNLINK")
    def unlink(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        self.ops.unlink(parent_inode, name, ctx)

    @_served("RMDIR")
    def rmdir(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        self.ops.rmdir(parent_inode, name, ctx)

    @_served("RENAME")
    def rename(self, p_old: int, n_old: bytes, p_new: int, n_new: bytes, flags: int, ctx: Any) -> None:
        self.ops.rename(p_old, n_old, p_new, n_new, flags, ctx)

    @_served("STATFS")
    def statfs(self, ctx: Any) -> pyfuse3.StatvfsData:
        sv, out = self.ops.statfs(ctx), pyfuse3.StatvfsData()
        for f in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree", "f_favail"):
            setattr(out, f, getattr(sv, f))
        out.f_namemax = sv.f_namemax
        return out

    @_served("GETXATTR")
    def getxattr(self, inode: int, name: bytes, ctx: Any) -> bytes:
        return self.ops.getxattr(inode, name, ctx)

    @_served("SETXATTR")
    def setxattr(self, inode: int, name: bytes, value: bytes, ctx: Any) -> None:
        self.ops.setxattr(inode, name, value, ctx)

    @_served("LISTXATTR")
    def listxattr(self, inode: int, ctx: Any) -> Sequence[bytes]:
        return self.ops.listxattr(inode, ctx)

    @_served("REMOVEXATTR")
    def removexattr(self, inode: int, name: bytes, ctx: Any) -> None:
        self.ops.removexattr(inode, name, ctx)

    @_served("ACCESS")
    def access(self, inode: int, mode: int, ctx: Any) -> bool:
        return True  # mounted with default_permissions: the kernel checks and does not ask

    # -- handles: the node's inode number ----------------------------------------------------------
    @_served("OPEN")
    def open(self, inode: int, flags: int, ctx: Any) -> pyfuse3.FileInfo:
        if flags & os.O_TRUNC and flags & os.O_ACCMODE != os.O_RDONLY:
            size0 = wire.EntryAttributes()  # st_size 0
            self.ops.setattr(inode, size0, wire.SetattrFields(update_size=True), None, ctx)
        return pyfuse3.FileInfo(fh=inode, keep_cache=True)  # as without OPEN: pages kept between opens

    @_served("CREATE")
    def create(
        self, parent_inode: int, name: bytes, mode: int, flags: int, ctx: Any
    ) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        made = self.ops.mknod(parent_inode, name, stat_mod.S_IFREG | stat_mod.S_IMODE(mode), 0, ctx)
        return pyfuse3.FileInfo(fh=made.st_ino, keep_cache=True), entry(made)

    @_served("READ")
    def read(self, fh: int, off: int, size: int) -> bytes:
        return self.ops.read(fh, off, size)

    @_served("WRITE")
    def write(self, fh: int, off: int, buf: bytes) -> int:
        return self.ops.write(fh, off, buf)

    @_served("FLUSH")
    def flush(self, fh: int) -> None:
        raise wire.FUSEError(errno.ENOSYS)  # nothing buffered here; the kernel sends no more flushes

    @_served("RELEASE")
    def release(self, fh: int) -> None:
        return None  # descriptors are the node's, closed when the kernel forgets it

    @_served("FSYNC")
    def fsync(self, fh: int, datasync: bool) -> None:
        self.ops.fsync(fh, datasync)

    @_served("OPENDIR")
    def opendir(self, inode: int, ctx: Any) -> int:
        self.ops.tree.get(inode)  # raises for an inode the table does not hold
        return inode

    @_served("READDIRPLUS")
    def readdir(self, fh: int, start_id: int, token: Any) -> None:
        self.ops.readdir(fh, start_id, token)

    @_served("RELEASEDIR")
    def releasedir(self, fh: int) -> None:
        return None

    @_served("FSYNCDIR")
    def fsyncdir(self, fh: int, datasync: bool) -> None:
        return None


def _invalidate_inode(ino: int, attr_only: bool = False) -> None:
    with contextlib.suppress(OSError):  # ENOENT: nothing cached of that inode
        pyfuse3.invalidate_inode(ino, attr_only)


def _invalidate_entry(parent: int, name: bytes) -> None:
    with contextlib.suppress(OSError):  # ENOENT: nothing cached under that name
        pyfuse3.invalidate_entry(parent, name)


class Pyfuse3Transport:
    """Mounts ``root`` through libfuse (mount(2) as root, fusermount3 otherwise) and serves ``ops`` there."""

    def __init__(self, ops: OverlayOps, root: Path, *, fsname: str, trace: Trace | None = None) -> None:
        self.adapter = Adapter(ops, trace)
        self.lock = self.adapter.lock
        self.root = root
        options = set(pyfuse3.default_options) | {f"fsname={fsname}", "subtype=speculate", "nosuid", "nodev"}
        if os.geteuid() == 0:
            options.add("allow_other")  # sandboxed commands may run under another uid
        pyfuse3.init(self.adapter, os.fspath(root), options)

    def serve(self) -> None:
        """Answer requests until the filesystem is unmounted or the process is signalled."""
        trio.run(self._main)

    async def _main(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_on_signal, nursery.cancel_scope)
            await pyfuse3.main(min_tasks=1, max_tasks=1)
            nursery.cancel_scope.cancel()  # unmounted from outside

    def close(self) -> None:
        pyfuse3.close(unmount=True)  # a no-op once unmounted from outside


async def _on_signal(scope: trio.CancelScope) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for _ in signals:
            scope.cancel()
            return
