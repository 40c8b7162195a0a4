"""The FUSE kernel protocol as this server speaks it: request and reply layouts (``include/uapi/linux/fuse.h``,
protocol 7.31 to 7.45), and the small value types the handlers exchange with the request loop.

The server reads requests from ``/dev/fuse`` itself instead of through pyfuse3: a request then costs one
read, a struct unpack, the handler and one write (about a third of what pyfuse3's trio loop took per
request), and the server can answer what pyfuse3 would not let it: an OPEN with ENOSYS (libfuse's low-level
API allows that answer; pyfuse3 does not expose it) and an INIT without atomic O_TRUNC (see
:mod:`overlayfs.fuse.server`).

Version: the INIT reply names ``min(kernel's minor, MINOR)``. :data:`MINOR` is the newest minor whose
changes were checked against these layouts (7.45, Linux 6.18): every change since 7.31 is a flag this server
does not ask for, an opcode it answers ENOSYS, or a field it sends as zero. Below :data:`MIN_MINOR`, or
without :data:`NO_OPEN_SUPPORT` and :data:`NO_OPENDIR_SUPPORT` offered, the design cannot work (every
``opendir`` would fail) and the server refuses to mount.
"""

from __future__ import annotations

import errno
import struct
from dataclasses import dataclass
from typing import Any

from overlayfs.errors import OverlayError

# Opcodes (enum fuse_opcode).
LOOKUP, FORGET, GETATTR, SETATTR, READLINK, SYMLINK = 1, 2, 3, 4, 5, 6
MKNOD, MKDIR, UNLINK, RMDIR, RENAME, LINK, OPEN, READ, WRITE, STATFS, RELEASE = (
    8,
    9,
    10,
    11,
    12,
    13,
    14,
    15,
    16,
    17,
    18,
)
FSYNC, SETXATTR, GETXATTR, LISTXATTR, REMOVEXATTR, FLUSH, INIT = 20, 21, 22, 23, 24, 25, 26
OPENDIR, READDIR, RELEASEDIR, FSYNCDIR, ACCESS, CREATE, INTERRUPT, DESTROY = 27, 28, 29, 30, 34, 35, 36, 38
BATCH_FORGET, READDIRPLUS, RENAME2 = 42, 44, 45
NO_REPLY = frozenset((FORGET, BATCH_FORGET, INTERRUPT))  # the kernel waits for no answer to these
MINOR, MIN_MINOR = 45, 31  # the newest minor checked against these layouts; the oldest the design works on

# INIT flags (the low 32 bits in ``flags``, the high ones in ``flags2``).
ASYNC_READ, ATOMIC_O_TRUNC, BIG_WRITES, AUTO_INVAL_DATA = 1 << 0, 1 << 3, 1 << 5, 1 << 12
DO_READDIRPLUS, PARALLEL_DIROPS, MAX_PAGES, INIT_EXT = 1 << 13, 1 << 18, 1 << 22, 1 << 30
NO_OPEN_SUPPORT, NO_OPENDIR_SUPPORT = 1 << 17, 1 << 24  # an OPEN / OPENDIR answered ENOSYS means "no more"
# setattr's ``valid`` bits (FATTR_*).
FATTR_MODE, FATTR_UID, FATTR_GID, FATTR_SIZE, FATTR_ATIME, FATTR_MTIME, FATTR_FH = 1, 2, 4, 8, 16, 32, 64
FATTR_ATIME_NOW, FATTR_MTIME_NOW = 128, 256
GETATTR_FH = 1
RENAME_NOREPLACE, RENAME_EXCHANGE, RENAME_WHITEOUT = 1, 2, 4
NOTIFY_INVAL_INODE, NOTIFY_INVAL_ENTRY = 2, 3
MAX_WRITE = 1 << 20  # with MAX_PAGES: 1 MiB reads and writes
BUFFER = MAX_WRITE + 4096  # a request: its header, arguments and up to MAX_WRITE bytes of data

IN_HEADER = struct.Struct("<IIQQIIIHH")  # len opcode unique nodeid uid gid pid total_extlen padding
OUT_HEADER = struct.Struct("<IiQ")  # len error unique
ATTR = struct.Struct("<QQQQQQIIIIIIIIII")  # fuse_attr
ENTRY = struct.Struct("<QQQQII")  # fuse_entry_out before its attr
ATTR_OUT = struct.Struct("<QII")  # fuse_attr_out before its attr
DIRENT = struct.Struct("<QQII")  # ino off namelen type
INIT_IN = struct.Struct("<IIIII")  # major minor max_readahead flags flags2
INIT_OUT = struct.Struct("<IIIIHHIIHHIIH22x")  # 64 bytes
SETATTR_IN = struct.Struct("<IIQQQQQQIIIIIIII")
READ_IN = struct.Struct("<QQII")  # fh offset size read_flags (then lock_owner, flags: unused here)
WRITE_IN = struct.Struct("<QQII8xII")  # fh offset size write_flags lock_owner flags padding: 40 bytes
WRITE_OUT = struct.Struct("<II")
STATFS_OUT = struct.Struct("<QQQQQIII4x24x")
NOTIFY_INODE = struct.Struct("<Qqq")
NOTIFY_ENTRY = struct.Struct("<QII")
_NS = 1_000_000_000


class FUSEError(OverlayError):
    """A handler's answer that the request failed with ``errno``."""

    def __init__(self, errno_: int) -> None:
        super().__init__(errno_)
        self.errno = errno_


ENOATTR = errno.ENODATA


@dataclass(slots=True)
class Context:
    """Who made a request (the caller's ids; ``umask`` is 0: the kernel applies it before sending)."""

    uid: int
    gid: int
    pid: int
    umask: int = 0


class EntryAttributes:
    """A node's attributes as the kernel caches them, with how long it may."""

    __slots__ = (
        "attr_timeout",
        "entry_timeout",
        "generation",
        "st_atime_ns",
        "st_blksize",
        "st_blocks",
        "st_ctime_ns",
        "st_gid",
        "st_ino",
        "st_mode",
        "st_mtime_ns",
        "st_nlink",
        "st_rdev",
        "st_size",
        "st_uid",
    )

    def __init__(self) -> None:
        self.st_ino = self.generation = self.st_mode = self.st_nlink = self.st_uid = self.st_gid = 0
        self.st_rdev = self.st_size = self.st_blocks = self.st_atime_ns = self.st_mtime_ns = 0
        self.st_ctime_ns = 0
        self.st_blksize = 4096
        self.entry_timeout = self.attr_timeout = 0.0

    def pack_attr(self) -> bytes:
        a, m, c = self.st_atime_ns, self.st_mtime_ns, self.st_ctime_ns
        return ATTR.pack(
            self.st_ino,
            self.st_size,
            self.st_blocks,
            a // _NS,
            m // _NS,
            c // _NS,
            a % _NS,
            m % _NS,
            c % _NS,
            self.st_mode,
            self.st_nlink,
            self.st_uid & 0xFFFFFFFF,
            self.st_gid & 0xFFFFFFFF,
            self.st_rdev & 0xFFFFFFFF,
            self.st_blksize,
            0,
        )

    def pack_entry(self) -> bytes:
        e, t = _split(self.entry_timeout), _split(self.attr_timeout)
        return ENTRY.pack(self.st_ino, self.generation, e[0], t[0], e[1], t[1]) + self.pack_attr()

    def pack_attr_out(self) -> bytes:
        t = _split(self.attr_timeout)
        return ATTR_OUT.pack(t[0], t[1], 0) + self.pack_attr()


def _split(seconds: float) -> tuple[int, int]:
    whole = int(seconds)
    return whole, int((seconds - whole) * _NS)


ENTRY_ATTR = struct.Struct("<QQQQIIQQQQQQIIIIIIIIII")  # fuse_entry_out whole
ATTR_OUT_ATTR = struct.Struct("<QIIQQQQQQIIIIIIIIII")  # fuse_attr_out whole


class StatEntry:
    """A node's attributes straight from its backing file's ``os.stat_result`` (packed in one go: a
    readdirplus reply carries one per entry)."""

    __slots__ = ("attr_timeout", "entry_timeout", "st", "st_ino")

    def __init__(self, ino: int, st: Any, entry_timeout: float, attr_timeout: float) -> None:
        self.st_ino, self.st, self.entry_timeout, self.attr_timeout = ino, st, entry_timeout, attr_timeout

    @property
    def st_mode(self) -> int:
        return self.st.st_mode

    def _attr(self) -> tuple[int, ...]:
        st = self.st
        a, m, c = st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns
        return (
            self.st_ino,
            st.st_size,
            st.st_blocks,
            a // _NS,
            m // _NS,
            c // _NS,
            a % _NS,
            m % _NS,
            c % _NS,
            st.st_mode,
            st.st_nlink,
            st.st_uid & 0xFFFFFFFF,
            st.st_gid & 0xFFFFFFFF,
            st.st_rdev & 0xFFFFFFFF,
            st.st_blksize,
            0,
        )

    def pack_entry(self) -> bytes:
        e, t = int(self.entry_timeout), int(self.attr_timeout)
        return ENTRY_ATTR.pack(self.st_ino, 0, e, t, 0, 0, *self._attr())

    def pack_attr_out(self) -> bytes:
        return ATTR_OUT_ATTR.pack(int(self.attr_timeout), 0, 0, *self._attr())


Entry = EntryAttributes | StatEntry


@dataclass(slots=True)
class SetattrFields:
    update_mode: bool = False
    update_uid: bool = False
    update_gid: bool = False
    update_size: bool = False
    update_atime: bool = False
    update_mtime: bool = False


@dataclass(slots=True)
class StatvfsData:
    f_bsize: int = 0
    f_frsize: int = 0
    f_blocks: int = 0
    f_bfree: int = 0
    f_bavail: int = 0
    f_files: int = 0
    f_ffree: int = 0
    f_favail: int = 0
    f_namemax: int = 255

    def pack(self) -> bytes:
        return STATFS_OUT.pack(
            self.f_blocks,
            self.f_bfree,
            self.f_bavail,
            self.f_files,
            self.f_ffree,
            self.f_bsize,
            self.f_namemax,
            self.f_frsize,
        )


class ReaddirToken:
    """The reply buffer of one READDIRPLUS (or READDIR) request: :func:`readdir_reply` (:func:`dirent_reply`)
    adds entries while they fit."""

    __slots__ = ("out", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        self.out = bytearray()


def readdir_reply(token: ReaddirToken, name: bytes, attrs: EntryAttributes | StatEntry, next_id: int) -> bool:
    """Add one entry (with its attributes: the kernel makes its dentry at once); False when it does not
    fit, and then it was not added."""
    rec = (
        attrs.pack_entry()
        + DIRENT.pack(attrs.st_ino, next_id, len(name), (attrs.st_mode >> 12) & 0o17)
        + name
    )
    pad = -len(rec) % 8
    if len(token.out) + len(rec) + pad > token.size:
        return False
    token.out += rec
    if pad:
        token.out += b"\0" * pad
    return True


def dirent_reply(token: ReaddirToken, name: bytes, ino: int, mode: int, next_id: int) -> bool:
    """Add one plain READDIR entry (name and type, no attributes); False when it does not fit."""
    rec = DIRENT.pack(ino, next_id, len(name), (mode >> 12) & 0o17) + name
    rec += b"\0" * (-len(rec) % 8)
    if len(token.out) + len(rec) > token.size:
        return False
    token.out += rec
    return True


def setattr_fields(valid: int) -> SetattrFields:
    return SetattrFields(
        bool(valid & FATTR_MODE),
        bool(valid & FATTR_UID),
        bool(valid & FATTR_GID),
        bool(valid & FATTR_SIZE),
        bool(valid & (FATTR_ATIME | FATTR_ATIME_NOW)),
        bool(valid & (FATTR_MTIME | FATTR_MTIME_NOW)),
    )


def cstrings(data: memoryview | bytes, n: int) -> list[bytes]:
    """The first ``n`` NUL-terminated strings of ``data``."""
    out, pos = [], 0
    raw = bytes(data)
    for _ in range(n):
        end = raw.index(b"\0", pos)
        out.append(raw[pos:end])
        pos = end + 1
    return out
