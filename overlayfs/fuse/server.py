"""The request loop of the FUSE server: read each request from ``/dev/fuse``, call its handler
(:mod:`.requests`), write the reply; INIT; notifications to the kernel. Mounting is :mod:`.device`'s.

One thread serves the requests in order (handlers are plain syscalls; worker threads measured slower). Other
threads (the owner's control channel, the owner watch) change the tree only under :attr:`Server.lock`,
which the loop holds for each request, and send their notifications without it: a notification may wait
for a lock that a request the loop has not answered yet holds.

OPEN, OPENDIR and CREATE are answered ENOSYS: the kernel then opens files and directories without asking
(and sends no RELEASE), makes new files with MKNOD, keeps file pages cached between opens and caches
directory listings; READ, WRITE and READDIRPLUS name the node (:mod:`overlayfs.fuse.files`): no handles.
For the kernel then to send a truncating open's truncation as a SETATTR, the INIT reply leaves out atomic
O_TRUNC. (FUSE passthrough, which the kernel
offers, needs an OPEN to name the backing file, and CAP_SYS_ADMIN; measured, a 10 KB file cost the same
either way, and no OPEN costs less than both.)

The server reads and answers INIT when it is made, before it says it is ready: it answers with the minor it
was checked against when the kernel offers a newer one, and refuses to serve (:class:`ProtocolRefused`, a
MountError: the backend then chooses another transport) a kernel older than 7.31 or one that cannot open
without asking. A request it cannot parse (truncated, malformed, an unknown opcode) is answered with an
error, never a dead loop; nothing a handler does waits on another process (see :mod:`.files`).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import struct
import threading
from collections.abc import Callable
from typing import Any

from overlayfs.errors import MountError
from overlayfs.fuse import wire
from overlayfs.fuse.device import abandon, mount_device, unmount_lazily
from overlayfs.fuse.requests import ARG_SIZE, Requests, enosys
from overlayfs.fuse.wire import FUSEError

log = logging.getLogger("overlayfs.fuse")
_U32 = struct.Struct("<I")
LOG_LIMIT = 1 << 20  # bytes of messages the server logs to meta/ on the host; then it stops logging


class ProtocolRefused(MountError):
    """The kernel's FUSE protocol lacks what this transport needs (the message says what)."""


class _LogBudget(logging.Filter):
    """Stops the server's log (on the host disk, beside meta/) at :data:`LOG_LIMIT` bytes of messages: a
    command able to provoke a logged error per request could otherwise write without bound."""

    def __init__(self) -> None:
        super().__init__()
        self.left = LOG_LIMIT

    def filter(self, record: logging.LogRecord) -> bool:
        if self.left <= 0:
            return False
        self.left -= len(record.getMessage()) + (4096 if record.exc_info else 0)
        if self.left <= 0:
            record.msg = f"{record.getMessage()} (the log reached {LOG_LIMIT} bytes: nothing more is logged)"
            record.args = None
        return True


log.addFilter(_LogBudget())


class Server(Requests):
    """Serves ``ops`` (an :class:`overlayfs.fuse.ops.OverlayOps`) on the FUSE device ``fd``."""

    def __init__(self, ops: Any, fd: int, *, init: bool = True) -> None:
        """``init``: read and answer the kernel's INIT now (it is queued at mount time), so that a kernel
        this transport cannot serve is refused before the mount is used: raises :class:`ProtocolRefused`."""
        self.ops, self.fd = ops, fd
        self.lock = threading.Lock()
        self.minor = 0  # the protocol minor agreed at INIT (0: not yet)
        self.refused: str | None = None  # why INIT was refused
        self._buf = bytearray(wire.BUFFER)
        self._read_view = memoryview(bytearray(wire.MAX_WRITE))
        self._table: dict[int, Callable[..., bytes | None]] = {
            wire.LOOKUP: self._lookup,
            wire.FORGET: self._forget,
            wire.BATCH_FORGET: self._batch_forget,
            wire.GETATTR: self._getattr,
            wire.SETATTR: self._setattr,
            wire.READLINK: self._readlink,
            wire.SYMLINK: self._symlink,
            wire.MKNOD: self._mknod,
            wire.MKDIR: self._mkdir,
            wire.UNLINK: self._unlink,
            wire.RMDIR: self._rmdir,
            wire.RENAME: self._rename,
            wire.RENAME2: self._rename2,
            wire.LINK: self._link,
            wire.OPEN: self._open,
            wire.READ: self._read,
            wire.WRITE: self._write,
            wire.STATFS: self._statfs,
            wire.RELEASE: self._release,
            wire.FSYNC: self._fsync,
            wire.SETXATTR: self._setxattr,
            wire.GETXATTR: self._getxattr,
            wire.LISTXATTR: self._listxattr,
            wire.REMOVEXATTR: self._removexattr,
            wire.FLUSH: self._flush,
            wire.INIT: self._init,
            wire.OPENDIR: self._opendir,
            wire.READDIR: self._readdir,
            wire.READDIRPLUS: self._readdirplus,
            wire.RELEASEDIR: self._releasedir,
            wire.FSYNCDIR: self._fsyncdir,
            wire.CREATE: self._create,
            wire.INTERRUPT: self._no_reply,
            wire.DESTROY: self._destroy,
        }
        self._done = False
        if init:
            self.handshake()

    def handshake(self) -> None:
        """Read and answer INIT, the kernel's first request. Raises ProtocolRefused (after answering the
        kernel with an error, which fails every later request of the mount) when it cannot be served."""
        while self.minor == 0 and self.refused is None:
            n = self._next()
            if n is None:
                raise ProtocolRefused("the FUSE connection ended before INIT")
            if n >= wire.IN_HEADER.size and wire.IN_HEADER.unpack_from(self._buf)[1] != wire.INIT:
                raise ProtocolRefused("the kernel's first FUSE request was not INIT")
            self._dispatch(memoryview(self._buf), n)
        if self.refused is not None:
            raise ProtocolRefused(self.refused)

    # -- the loop ------------------------------------------------------------------------------------
    def serve(self) -> None:
        """Answer requests until the filesystem is unmounted (or DESTROY). Raises ProtocolRefused if the INIT
        it answered (when made with ``init=False``) was refused."""
        view = memoryview(self._buf)
        while not self._done:
            n = self._next()
            if n is None:
                break
            self._dispatch(view, n)
        if self.refused is not None:
            raise ProtocolRefused(self.refused)

    def _next(self) -> int | None:
        """The next request into the buffer: its length, or None once the connection is gone."""
        while True:
            try:
                n = os.readv(self.fd, [self._buf])
            except OSError as e:
                if e.errno in (errno.ENOENT, errno.EINTR, errno.EAGAIN):  # a request withdrawn before read
                    continue
                if e.errno == errno.ENODEV:  # unmounted, or the connection aborted
                    return None
                raise
            return n or None  # 0: the other end closed (a socket in tests; /dev/fuse never reads 0)

    def _dispatch(self, view: memoryview, n: int) -> None:
        """Answer the request in ``view[:n]``: with the handler's reply, or an error reply for any failure
        (a request it cannot even parse included); never a reply to one the kernel waits no answer for."""
        if n < wire.IN_HEADER.size:  # too short to name the request: nothing can be answered
            log.warning("a request of %d bytes, shorter than its header, was dropped", n)
            return
        length, op, unique, node, uid, gid, pid, _, _ = wire.IN_HEADER.unpack_from(view)
        arg = view[wire.IN_HEADER.size : n]
        if length != n or len(arg) < ARG_SIZE.get(op, 0):
            error = errno.EINVAL
        elif op == wire.READ and self._fast_read(unique, node, arg):  # most requests: no more than needed
            return
        else:
            handler = self._table.get(op)
            try:
                with self.lock:
                    out = handler(node, arg, wire.Context(uid, gid, pid)) if handler else enosys()
            except FUSEError as e:
                error = e.errno
            except (struct.error, ValueError, IndexError):  # arguments shorter or other than the opcode's
                error = errno.EINVAL
            except OSError as e:
                error = e.errno or errno.EIO
            except Exception:
                log.exception("request %d failed", op)
                error = errno.EIO
            else:
                if out is not None:
                    self._reply(unique, out)
                return
        if op not in wire.NO_REPLY:
            self._reply(unique, b"", error)

    def _fast_read(self, unique: int, node: int, arg: memoryview) -> bool:
        """A READ of a node whose reader is open: answered here, into a buffer kept for it (a fresh 1 MiB
        bytes object per read cost its page faults); False: take the general path."""
        _, off, size, _ = wire.READ_IN.unpack_from(arg)  # its size checked by the caller
        with self.lock:  # the control thread may drop the node and close its descriptor meanwhile
            n = self.ops.tree.nodes.get(node)
            if n is None or n.rfd < 0 or n.rfd_upper != n.upper or size > wire.MAX_WRITE:
                return False
            try:
                got = os.preadv(n.rfd, [self._read_view[:size]], off)
            except OSError:
                return False
        try:
            os.writev(
                self.fd, [wire.OUT_HEADER.pack(wire.OUT_HEADER.size + got, 0, unique), self._read_view[:got]]
            )
        except OSError as e:
            self._unsent(e)
        return True

    def _reply(self, unique: int, payload: bytes, error: int = 0) -> None:
        header = wire.OUT_HEADER.pack(wire.OUT_HEADER.size + len(payload), -error, unique)
        try:
            if len(payload) > 4096:
                os.writev(self.fd, [header, payload])
            else:
                os.write(self.fd, header + payload)
        except OSError as e:
            self._unsent(e)

    def _unsent(self, e: OSError) -> None:
        """A reply the device (or socket) refused: the request was interrupted and is gone (ENOENT), or the
        connection is (then the loop ends)."""
        if e.errno in (errno.ENODEV, errno.EPIPE, errno.ECONNRESET):
            self._done = True
        elif e.errno != errno.ENOENT:
            raise e

    # -- notifications (any thread) ------------------------------------------------------------------
    def invalidate_entry(self, parent: int, name: bytes) -> None:
        payload = wire.NOTIFY_ENTRY.pack(parent, len(name), 0) + name + b"\0"
        self._notify(wire.NOTIFY_INVAL_ENTRY, payload)

    def invalidate_inode(self, ino: int, attr_only: bool = False) -> None:
        self._notify(wire.NOTIFY_INVAL_INODE, wire.NOTIFY_INODE.pack(ino, -1 if attr_only else 0, 0))

    def _notify(self, code: int, payload: bytes) -> None:
        with contextlib.suppress(OSError):  # ENOENT: nothing cached under that name or inode
            os.write(self.fd, wire.OUT_HEADER.pack(wire.OUT_HEADER.size + len(payload), code, 0) + payload)

    # -- handlers ------------------------------------------------------------------------------------
    def _init(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        if self.minor or self.refused is not None:
            raise FUSEError(errno.EPROTO)  # the kernel sends one INIT
        major, minor, readahead, flags = struct.unpack_from("<IIII", arg)
        flags2 = _U32.unpack_from(arg, 16)[0] if flags & wire.INIT_EXT and len(arg) >= 20 else 0
        offered = flags | flags2 << 32
        need = {
            "FUSE_NO_OPEN_SUPPORT": wire.NO_OPEN_SUPPORT,
            "FUSE_NO_OPENDIR_SUPPORT": wire.NO_OPENDIR_SUPPORT,
        }
        missing = [name for name, bit in need.items() if not offered & bit]
        if major != 7 or minor < wire.MIN_MINOR or missing:
            self.refused = (
                f"the kernel offers FUSE protocol {major}.{minor}"
                + (f" without {' and '.join(missing)}" if missing else "")
                + f": the own transport needs 7.{wire.MIN_MINOR} or later with FUSE_NO_OPEN_SUPPORT and "
                "FUSE_NO_OPENDIR_SUPPORT (it answers OPEN and OPENDIR with ENOSYS)"
            )
            self._done = True  # the kernel fails every later request of this mount
            raise FUSEError(errno.EPROTO)
        want = (
            wire.ASYNC_READ
            | wire.BIG_WRITES
            | wire.AUTO_INVAL_DATA
            | wire.DO_READDIRPLUS
            | wire.MAX_PAGES
            | wire.INIT_EXT
        ) & offered
        self.minor = min(minor, wire.MINOR)  # the kernel speaks the older of the two
        return wire.INIT_OUT.pack(
            7,
            self.minor,
            readahead,
            want & 0xFFFFFFFF,
            16,
            12,
            wire.MAX_WRITE,
            1,
            wire.MAX_WRITE // 4096,
            0,
            want >> 32,
            0,
            0,
        )

    def _destroy(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        self._done = True
        return b""

    def _no_reply(self, node: int, arg: memoryview, ctx: wire.Context) -> None:
        return None


__all__ = ["ProtocolRefused", "Server", "abandon", "mount_device", "unmount_lazily"]
