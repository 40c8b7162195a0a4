"""The own transport's request handlers: each opcode's argument unpacked from the request's bytes
(``include/uapi/linux/fuse.h``), the operation called, the reply packed. A handler raises FUSEError for a
failed operation and ValueError or struct.error for an argument it cannot parse (the loop in
:mod:`overlayfs.fuse.server` answers the first with its errno, the others with EINVAL)."""

from __future__ import annotations

import errno
import struct
import time
from typing import Any

from overlayfs.fuse import wire
from overlayfs.fuse.wire import FUSEError

_U32, _U64, _TWO_U32 = struct.Struct("<I"), struct.Struct("<Q"), struct.Struct("<II")
FSYNC_IN = struct.Struct("<QII")
# The fixed part of each request's argument (include/uapi/linux/fuse.h); a shorter one is answered EINVAL.
# A name that follows must end in a NUL (:func:`_name`). INIT's grew from 16 to 64 bytes in 7.36.
ARG_SIZE = {
    wire.FORGET: 8,
    wire.GETATTR: 16,
    wire.SETATTR: wire.SETATTR_IN.size,
    wire.MKNOD: 16,
    wire.MKDIR: 8,
    wire.RENAME: 8,
    wire.RENAME2: 16,
    wire.LINK: 8,
    wire.READ: 40,
    wire.WRITE: wire.WRITE_IN.size,
    wire.FSYNC: 16,
    wire.SETXATTR: 8,
    wire.GETXATTR: 8,
    wire.LISTXATTR: 8,
    wire.INIT: 16,
    wire.READDIR: 40,
    wire.READDIRPLUS: 40,
    wire.BATCH_FORGET: 8,
    wire.INTERRUPT: 8,
}


class Requests:
    """The handlers of the opcodes that reach :attr:`ops` (an :class:`overlayfs.fuse.ops.OverlayOps`)."""

    ops: Any

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
        if len(data) != size:
            raise FUSEError(errno.EINVAL)
        return wire.WRITE_OUT.pack(self.ops.write(node, off, data), 0)

    def _statfs(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        return self.ops.statfs(ctx).pack()

    def _release(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        return b""  # no handles: the kernel sends none once OPEN, OPENDIR and CREATE are answered ENOSYS

    def _fsync(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        _, flags, _ = FSYNC_IN.unpack_from(arg)
        self.ops.fsync(node, bool(flags & 1))
        return b""

    def _setxattr(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        size = _U32.unpack_from(arg)[0]
        raw = bytes(arg[8:])
        name, nul, rest = raw.partition(b"\0")
        if not nul or len(rest) < size:
            raise FUSEError(errno.EINVAL)
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

    def _readdir(self, node: int, arg: memoryview, ctx: wire.Context) -> bytes:
        _, off, size, _ = wire.READ_IN.unpack_from(arg)
        token = wire.ReaddirToken(size)
        self.ops.readdir_names(node, off, token)
        return bytes(token.out)

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
    """The NUL-terminated name at the start of ``arg``; ValueError (EINVAL) if it is not terminated."""
    raw = bytes(arg)
    return raw[: raw.index(b"\0")]


def _sized(value: bytes, size: int) -> bytes:
    if size == 0:  # the caller asks how large
        return struct.pack("<II", len(value), 0)
    if len(value) > size:
        raise FUSEError(errno.ERANGE)
    return value


def enosys() -> bytes:
    raise FUSEError(errno.ENOSYS)
