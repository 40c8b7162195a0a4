"""Making one batch of a promotion's writes durable in one round: a ``syncfs`` of the project's filesystem
where that is trustworthy and cheap, else concurrent fsyncs of every file and directory of the batch.

``syncfs(2)`` writes back and commits everything dirty on one filesystem: one journal commit and one system
call for the whole batch instead of an fsync per staged file and per directory on a thread pool. It is
used only when all of these hold (else the batch falls back to the fsyncs, which are always correct):

- Linux 5.8 or later: before, syncfs returned 0 even when writeback failed;
- the filesystem is ext4, xfs, btrfs or tmpfs, whose syncfs writes back and commits everything (a FUSE
  server, NFS or overlayfs may do less, or report less);
- the descriptor it is called on was opened before the batch's writes (:class:`Flush` is made first):
  syncfs reports a writeback error of the filesystem that happened since that descriptor was opened;
- every file and directory of the batch is on that filesystem (a mount point inside the project is not),
  and there are at least :data:`MIN_PATHS` of them;
- the dirty and in-writeback memory of the whole machine (``/proc/meminfo``), less the bytes the batch
  itself wrote, is at most :data:`DIRTY_LIMIT`: syncfs also flushes other processes' unrelated data on the
  same filesystem, and a promotion must not wait for somebody's download. Under such writes the fsyncs,
  which write back only our files, are the cheaper round.

A writeback error anywhere on that filesystem since the descriptor was opened fails the batch (an error
in somebody else's file rolls the promotion back too: the conservative side).
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
from collections.abc import Iterable
from types import TracebackType

from overlayfs.copyup import fsync_all

# Only the benchmark turns this off, to compare with the per-file fsyncs in one run (bench/micro/accept_bench).
SYNCFS = True
# Other processes' dirty data (bytes, the whole machine) above which a batch uses fsyncs instead of syncfs.
DIRTY_LIMIT = 16 << 20
# A smaller batch is fsync'd on the promoting thread (copyup.run_all): as cheap as a syncfs, and it writes
# back nothing of anybody else's.
MIN_PATHS = 3
# statfs f_type of the filesystems whose syncfs is trusted: ext2/3/4, xfs, btrfs, tmpfs.
TRUSTED = {0xEF53, 0x58465342, 0x9123683E, 0x01021994}

_libc = ctypes.CDLL(None, use_errno=True)
_release = re.match(r"(\d+)\.(\d+)", os.uname().release)
_KERNEL_OK = _release is not None and (int(_release[1]), int(_release[2])) >= (5, 8)
_HAVE = _KERNEL_OK and hasattr(_libc, "syncfs") and hasattr(_libc, "fstatfs")


def syncfs(fd: int) -> None:
    """syncfs(2) (not in :mod:`os`); raises OSError."""
    if _libc.syncfs(ctypes.c_int(fd)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def fs_magic(fd: int) -> int | None:
    """The filesystem type (``statfs.f_type``) of ``fd``; None if it cannot be told."""
    buf = ctypes.create_string_buffer(256)  # struct statfs is 120 bytes on 64-bit Linux, 64 on 32-bit
    if _libc.fstatfs(ctypes.c_int(fd), buf) != 0:
        return None
    # f_type is the first field and a word on every Linux ABI but s390x (32 bits, big-endian), where this
    # reads another value and the batch falls back to fsyncs.
    return ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF


def dirty_bytes() -> int:
    """Dirty plus in-writeback memory of the whole machine, in bytes (/proc/meminfo)."""
    total = 0
    with open("/proc/meminfo", "rb") as f:
        for line in f:
            if line.startswith((b"Dirty:", b"Writeback:")):
                total += int(line.split()[1]) * 1024
    return total


class Flush:
    """One durability round over a batch of writes under ``root``: made before the writes (the syncfs
    descriptor must predate them), then :meth:`plan` (which round to use, given the bytes the batch will
    write) and :meth:`sync` (the round itself). ``root`` None: not durable, nothing to do."""

    def __init__(self, root: str | None) -> None:
        self.root = root
        self.fd: int | None = None
        self.dev = -1
        self.use_syncfs: bool | None = None  # decided by plan()
        if root is None or not SYNCFS or not _HAVE:
            return
        try:
            fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return  # the fsyncs then, which will name what fails
        if fs_magic(fd) in TRUSTED:
            self.fd, self.dev = fd, os.fstat(fd).st_dev
        else:
            os.close(fd)

    def __enter__(self) -> Flush:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def plan(self, paths: int, ours: int = 0) -> bool:
        """Whether the batch of ``paths`` files and directories, which writes ``ours`` bytes of file data,
        will be one syncfs (then its files need no fsync of their own)."""
        if self.use_syncfs is None:
            try:
                self.use_syncfs = (
                    self.fd is not None and paths >= MIN_PATHS and dirty_bytes() <= DIRTY_LIMIT + ours
                )
            except (OSError, ValueError, IndexError):
                self.use_syncfs = False
        return self.use_syncfs

    def sync(self, paths: Iterable[str]) -> str:
        """Make ``paths`` (files and directories, which must exist) durable; returns how: "syncfs" or
        "fsync". Raises OSError (the fsync's names its path; a syncfs error names the project root)."""
        paths = list(paths)
        if (
            self.plan(len(paths))
            and self.fd is not None
            and all(os.lstat(p).st_dev == self.dev for p in paths)
        ):
            try:
                syncfs(self.fd)
            except OSError as e:
                if e.errno != errno.ENOSYS:  # a seccomp filter, an emulator: the fsyncs below
                    raise OSError(e.errno, f"{e.strerror} (syncfs)", self.root) from None
            else:
                return "syncfs"
        fsync_all(paths)
        return "fsync"
