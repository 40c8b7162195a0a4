"""Stamps of real entries, and the atomic renames that let promotion compare them at the last moment.

A stamp says which entry stands at a path and whether it was written since: device, inode, mode, size,
mtime, ctime and link count for a file or link, device, inode and kind for a directory. ``renameat2`` (not
in :mod:`os`) gives the two renames that close the gap between a comparison and a rename: a swap
(``RENAME_EXCHANGE``), after which what was displaced can be compared, and a rename that refuses an
existing target (``RENAME_NOREPLACE``). Used by :mod:`overlayfs.conflicts` and :mod:`overlayfs.steps`.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat as stat_mod

from overlayfs.errors import OverlayError

Stamp = list[int]


def stamp(st: os.stat_result) -> Stamp:
    """What identifies a real entry for the re-checks: a directory by kind and inode (its own times move with
    its entries, each of which is checked on its own), anything else also by mode, size, mtime and ctime,
    and its link count (see :func:`key`)."""
    if stat_mod.S_ISDIR(st.st_mode):
        return [st.st_dev, st.st_ino, stat_mod.S_IFDIR]
    return [st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_nlink]


def key(s: Stamp) -> Stamp:
    """The part of a stamp the re-checks compare. A file with other hard links when it was checked is
    compared without its ctime: backing up or replacing one of its names moves the ctime of all of them."""
    if len(s) == 3:
        return s
    return s[:5] if len(s) > 6 and s[6] > 1 else s[:6]


class Changed(OverlayError):
    """The real entry at ``rel`` is not the one the conflict check saw: the user changed it meanwhile."""

    def __init__(self, rel: str, reason: str) -> None:
        super().__init__(f"{rel}: {reason}")
        self.rel, self.reason = rel, reason


def why(want: Stamp | None, st: os.stat_result | None) -> str:
    if st is None:
        return "deleted in the real tree while the acceptance was being written"
    if want is None:
        return "created in the real tree while the acceptance was being written"
    return "changed in the real tree while the acceptance was being written"


_libc = ctypes.CDLL(None, use_errno=True)
_AT_FDCWD = -100
_RENAME_NOREPLACE, _RENAME_EXCHANGE = 1, 2
_UNSUPPORTED = (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP)


def renameat2(src: str, dst: str, flags: int) -> None:
    """renameat2(2) (not in :mod:`os`); the OSError names ``dst``."""
    if _libc.renameat2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), dst)


def rename_noreplace(src: str, dst: str) -> None:
    """rename(2) that fails with FileExistsError instead of replacing ``dst`` (atomically where the
    filesystem supports ``RENAME_NOREPLACE``; else a check just before a plain rename)."""
    try:
        renameat2(src, dst, _RENAME_NOREPLACE)
    except OSError as e:
        if e.errno not in _UNSUPPORTED:
            raise
        if os.path.lexists(dst):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), dst) from None
        os.rename(src, dst)


def exchange(a: str, b: str) -> bool:
    """Swap two names atomically (``RENAME_EXCHANGE``); False where the filesystem cannot."""
    try:
        renameat2(a, b, _RENAME_EXCHANGE)
        return True
    except OSError as e:
        if e.errno in _UNSUPPORTED:
            return False
        raise


def same(st: os.stat_result, want: Stamp) -> bool:
    """Whether ``st`` is the entry stamped ``want`` and unwritten since, a rename of it aside (which moves
    its ctime) apart."""
    if len(want) == 3:
        return [st.st_dev, st.st_ino, stat_mod.S_IFMT(st.st_mode)] == want
    return [st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns] == want[:5]
