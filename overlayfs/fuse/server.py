"""The request loop of the FUSE server: mount, read each request from ``/dev/fuse``, call the handler,
write the reply; notifications to the kernel; unmount.

One thread serves the requests in order (handlers are plain syscalls; worker threads measured slower). Other
threads (the owner's control channel, the owner watch) change the tree only under :attr:`Server.lock`,
which the loop holds for each request, and send their notifications without it: a notification may wait
for a lock that a request the loop has not answered yet holds.

OPEN, OPENDIR and CREATE are answered ENOSYS: the kernel then opens files and directories without asking
(and sends no RELEASE), makes new files with MKNOD, keeps file pages cached between opens and caches
directory listings; READ, WRITE and READDIRPLUS name the node (:mod:`overlayfs.fuse.files`): no handles. For the kernel then to send a truncating open's
truncation as a SETATTR, the INIT reply leaves out atomic O_TRUNC. (FUSE passthrough, which the kernel
offers, needs an OPEN to name the backing file, and CAP_SYS_ADMIN; measured, a 10 KB file cost the same
either way, and no OPEN costs less than both.)
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import struct
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from overlayfs.fuse import wire
from overlayfs.fuse.wire import FUSEError

log = logging.getLogger("overlayfs.fuse")
_libc = ctypes.CDLL(None, use_errno=True)
_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 2, 4, 2
_U32, _U64, _TWO_U32 = struct.Struct("<I"), struct.Struct("<Q"), struct.Struct("<II")


def mount_device(root: Path, *, fsname: str, subtype: str) -> int:
    """Mount an empty FUSE filesystem at ``root``; returns its ``/dev/fuse`` descriptor. Root mounts it
    itself; anyone else through fusermount3 (libfuse's protocol: the descriptor comes back over the socket
    named by ``_FUSE_COMMFD``)."""
    import socket

    if os.geteuid() == 0:
        fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
        data = f"fd={fd},rootmode=40000,user_id=0,group_id=0,default_permissions,allow_other"
        if _libc.mount(
            fsname.encode(),
            os.fsencode(root),
            f"fuse.{subtype}".encode(),
            ctypes.c_ulong(_MS_NOSUID | _MS_NODEV),
            data.encode(),
        ):
            err = ctypes.get_errno()
            os.close(fd)
            raise OSError(err, f"mounting FUSE at {root}: {os.strerror(err)}")
        return fd
    opts = f"rw,nosuid,nodev,default_permissions,subtype={subtype},fsname={fsname}"
    ours, theirs = socket.socketpair()
    with ours, theirs:
        r = subprocess.run(
            ["fusermount3", "-o", opts, "--", os.fspath(root)],
            capture_output=True,
            timeout=30,
            env={**os.environ, "_FUSE_COMMFD": str(theirs.fileno())},
            pass_fds=(theirs.fileno(),),
        )
        if r.returncode != 0:
            raise OSError(0, f"fusermount3 failed: {r.stderr.decode(errors='replace').strip()}")
        theirs.close()
        ours.settimeout(10)
        _, fds, _, _ = socket.recv_fds(ours, 1, 1)
    if not fds:
        raise OSError(0, "fusermount3 handed over no FUSE descriptor")
    return fds[0]


def unmount_lazily(root: Path) -> None:
    if os.geteuid() == 0:
        if _libc.umount2(os.fsencode(root), _MNT_DETACH) == 0:
            return
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        subprocess.run(["fusermount3", "-u", "-z", os.fspath(root)], capture_output=True, timeout=30)


class Server:
    """Serves ``ops`` (an :class:`overlayfs.fuse.ops.OverlayOps`) on the FUSE device ``fd``."""

    def __init__(self, ops: Any, fd: int) -> None:
        self.ops, self.fd = ops, fd
        self.lock = threading.Lock()
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
            wire.READDIRPLUS: self._readdirplus,
            wire.RELEASEDIR: self._releasedir,
            wire.FSYNCDIR: self._fsyncdir,
            wire.CREATE: self._create,
            wire.INTERRUPT: self._no_reply,
            wire.DESTROY: self._destroy,
        }
        self._done = False

    # -- the loop ------------------------------------------------------------------------------------
    def serve(self) -> None:
        """Answer requests until the filesystem is unmounted (or DESTROY)."""
        buf, view = self._buf, memoryview(self._buf)
        while not self._done:
            try:
                n = os.readv(self.fd, [buf])
            except OSError as e:
                if e.errno in (errno.ENOENT, errno.EINTR, errno.EAGAIN):  # a request withdrawn before read
                    continue
                if e.errno == errno.ENODEV:  # unmounted
                    return
                raise
            length, op, unique, node, uid, gid, pid, _, _ = wire.IN_HEADER.unpack_from(buf)
            arg = view[wire.IN_HEADER.size : min(length, n)]
            if op == wire.READ and self._fast_read(unique, node, arg):  # most requests: no more than needed
                continue
            handler = self._table.get(op)
            try:
                with self.lock:
                    out = handler(node, arg, wire.Context(uid, gid, pid)) if handler else _enosys()
            except FUSEError as e:
                self._reply(unique, b"", e.errno)
                continue
            except OSError as e:
                self._reply(unique, b"", e.errno or errno.EIO)
                continue
            except Exception:
                log.exception("request %d failed", op)
                self._reply(unique, b"", errno.EIO)
                continue
            if out is not None:
                self._reply(unique, out)

    def _fast_read(self, unique: int, node: int, arg: memoryview) -> bool:
        """A READ of a node whose reader is open: answered here, into a buffer kept for it (a fresh 1 MiB
        bytes object per read cost its page faults); False: take the general path."""
        _, off, size, _ = wire.READ_IN.unpack_from(arg)
        with self.lock:  # the control thread may drop the node and close its descriptor meanwhile
            n = self.ops.tree.nodes.get(node)
            if n is None or n.rfd < 0 or n.rfd_upper != n.upper or size > wire.MAX_WRITE:
                return False
            try:
                got = os.preadv(n.rfd, [self._read_view[:size]], off)
            except OSError:
                return False
        header = wire.OUT_HEADER.pack(wire.OUT_HEADER.size + got, 0, unique)
        try:
            os.writev(self.fd, [header, self._read_view[:got]])
        except OSError as e:  # ENOENT: the request was interrupted and is gone
            if e.errno != errno.ENOENT:
                raise
        return True

    def _reply(self, unique: int, payload: bytes, error: int = 0) -> None:
        header = wire.OUT_HEADER.pack(wire.OUT_HEADER.size + len(payload), -error, unique)
        try:
            if len(payload) > 4096:
                os.writev(self.fd, [header, payload])
            else:
                os.write(self.fd, header + payload)
        except OSError as e:  # ENOENT: the request was interrupted and is gone
            if e.errno != errno.ENOENT:
                raise

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
        major, minor, readahead, flags, flags2 = wire.INIT_IN.unpack_from(arg)
        if major != 7:
            raise FUSEError(errno.EPROTO)
        offered = flags | (flags2 << 32 if flags & wire.INIT_EXT else 0)
        want = (
            wire.ASYNC_READ
            | wire.BIG_WRITES
            | wire.AUTO_INVAL_DATA
            | wire.DO_READDIRPLUS
            | wire.MAX_PAGES
            | wire.INIT_EXT
        ) & offered
        return wire.INIT_OUT.pack(
            7,
            minor,
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

    def _lookup(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        return self.ops.lookup(node, _name(arg), ctx).pack_entry()

    def _forget(self, node: int, arg: memoryview, ctx: wire.Context) -> None:
        self.ops.forget([(node, _U64.unpack_from(arg)[0])])

    def _batch_forget(self, node: int, arg: memoryview, ctx: wire.Context) -> None:
        count = _U32.unpack_from(arg)[0]
        pairs = struct.unpack_from(f"<{2 * count}Q", arg, 8)
        self.ops.forget(list(zip(pairs[::2], pairs[1::2], strict=True)))

    def _getattr(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        return self.ops.getattr(node, ctx).pack_attr_out()

    def _setattr(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        (valid, _, fh, size, _, atime, mtime, _, atimensec, mtimensec, _, mode, _, uid, gid, _) = (
            wire.SETATTR_IN.unpack_from(arg)
        )
        attr = wire.EntryAttributes()
        attr.st_size, attr.st_mode, attr.st_uid, attr.st_gid = size, mode, uid, gid
        import time

        now = time.time_ns()
        attr.st_atime_ns = now if valid & wire.FATTR_ATIME_NOW else atime * 1_000_000_000 + atimensec
        attr.st_mtime_ns = now if valid & wire.FATTR_MTIME_NOW else mtime * 1_000_000_000 + mtimensec
        handle = fh if valid & wire.FATTR_FH and fh != 0 else None  # 0: opened without OPEN, no handle
        out = self.ops.setattr(node, attr, wire.setattr_fields(valid), handle, ctx)
        return out.pack_attr_out()

    def _readlink(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        return self.ops.readlink(node, ctx)

    def _symlink(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        name, target = wire.cstrings(arg, 2)
        return self.ops.symlink(node, name, target, ctx).pack_entry()

    def _mknod(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        mode, rdev = _TWO_U32.unpack_from(arg)
        return self.ops.mknod(node, _name(arg[16:]), mode, rdev, ctx).pack_entry()

    def _mkdir(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        mode = _U32.unpack_from(arg)[0]
        return self.ops.mkdir(node, _name(arg[8:]), mode, ctx).pack_entry()

    def _unlink(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        self.ops.unlink(node, _name(arg), ctx)
        return b""

    def _rmdir(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        self.ops.rmdir(node, _name(arg), ctx)
        return b""

    def _rename(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        old, new = wire.cstrings(arg[8:], 2)
        self.ops.rename(node, old, _U64.unpack_from(arg)[0], new, 0, ctx)
        return b""

    def _rename2(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        newdir, flags = struct.unpack_from("<QI", arg)
        old, new = wire.cstrings(arg[16:], 2)
        self.ops.rename(node, old, newdir, new, flags, ctx)
        return b""

    def _link(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        old = _U64.unpack_from(arg)[0]
        return self.ops.link(old, node, _name(arg[8:]), ctx).pack_entry()

    def _open(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        raise FUSEError(errno.ENOSYS)  # from now on the kernel opens without asking (see above)

    def _create(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        raise FUSEError(errno.ENOSYS)  # the kernel then makes the file with MKNOD and opens it without asking

    def _read(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        _, off, size, _ = wire.READ_IN.unpack_from(arg)
        return self.ops.read(node, off, size)

    def _write(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        _, off, size, _, _, _ = wire.WRITE_IN.unpack_from(arg)
        data = arg[wire.WRITE_IN.size : wire.WRITE_IN.size + size]
        return wire.WRITE_OUT.pack(self.ops.write(node, off, data), 0)

    def _statfs(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        return self.ops.statfs(ctx).pack()

    def _release(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        return b""  # no handles: the kernel sends none once OPEN, OPENDIR and CREATE are answered ENOSYS

    def _fsync(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        _, flags = struct.unpack_from("<QI", arg)
        self.ops.fsync(node, bool(flags & 1))
        return b""

    def _setxattr(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        size = _U32.unpack_from(arg)[0]
        raw = bytes(arg[8:])
        name, _, rest = raw.partition(b"\0")
        self.ops.setxattr(node, name, rest[:size], ctx)
        return b""

    def _getxattr(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        size = _U32.unpack_from(arg)[0]
        value = self.ops.getxattr(node, _name(arg[8:]), ctx)
        return _sized(value, size)

    def _listxattr(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        size = _U32.unpack_from(arg)[0]
        return _sized(b"".join(n + b"\0" for n in self.ops.listxattr(node, ctx)), size)

    def _removexattr(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        self.ops.removexattr(node, _name(arg), ctx)
        return b""

    def _flush(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        raise FUSEError(errno.ENOSYS)  # nothing buffered here; the kernel sends no more flushes

    def _opendir(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        raise FUSEError(errno.ENOSYS)  # as OPEN

    def _readdirplus(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        _, off, size, _ = wire.READ_IN.unpack_from(arg)
        token = wire.ReaddirToken(size)
        self.ops.readdir(node, off, token)
        return bytes(token.out)

    def _releasedir(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        return b""

    def _fsyncdir(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        return b""


def _name(arg: memoryview) -> bytes:
    raw = bytes(arg)
    end = raw.find(b"\0")
    return raw if end < 0 else raw[:end]


def _sized(value: bytes, size: int) -> bytes:
    if size == 0:  # the caller asks how large
        return struct.pack("<II", len(value), 0)
    if len(value) > size:
        raise FUSEError(errno.ERANGE)
    return value


def _enosys() -> bytes:
    raise FUSEError(errno.ENOSYS)
