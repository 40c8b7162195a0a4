"""Copying a lower file into the upper layer for copy-up: whole or not at all (an O_TMPFILE linked into
place, or a temporary name in the work directory renamed), its data copied by :func:`overlayfs.copyup.copy_fd`
(reflinked where the filesystem shares extents, else its data extents only: holes stay holes, as in the
kernel's copy-up) and its extended attributes (ACLs, ``user.*``) carried over, as the kernel's copy-up does
(promotion tells a file changed in place from a replacement by them: docs/overlay.md, "In place")."""

from __future__ import annotations

import ctypes
import errno
import os
import stat as stat_mod

from overlayfs.copyup import copy_fd, copy_xattrs

_AT_FDCWD = -100
_AT_SYMLINK_FOLLOW = 0x400
_libc = ctypes.CDLL(None, use_errno=True)


def copy_file(src: str, dst: str, st: os.stat_result, *, data: bool, work: str | None) -> None:
    """Copy a regular file so that ``dst`` appears complete or not at all (O_TMPFILE, then link)."""
    parent = os.path.dirname(dst)
    try:
        fd = os.open(parent, os.O_TMPFILE | os.O_WRONLY, stat_mod.S_IMODE(st.st_mode))
        tmp = None
    except OSError as e:  # filesystem without O_TMPFILE: a temp name in the work dir, renamed into place
        if work is None or e.errno == errno.ENOSPC:
            raise
        tmp = f"{work}/copyup.{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, stat_mod.S_IMODE(st.st_mode))
    try:
        # Never a blocking open: a FIFO swapped in for the file since its lstat opens at once, then fails.
        sfd = os.open(src, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            if data and st.st_size:
                copy_fd(sfd, fd)
            copy_xattrs(sfd, fd)
        finally:
            os.close(sfd)
        os.fchmod(fd, stat_mod.S_IMODE(st.st_mode))
        if tmp is None:
            _link_fd(fd, dst)
        else:
            os.rename(tmp, dst)
    except OSError:
        if tmp is not None and os.path.lexists(tmp):
            os.unlink(tmp)
        raise
    finally:
        os.close(fd)


def _link_fd(fd: int, dst: str) -> None:
    # os.link() would link the /proc magic link itself (EXDEV); linkat with AT_SYMLINK_FOLLOW follows it.
    if (
        _libc.linkat(
            _AT_FDCWD, f"/proc/self/fd/{fd}".encode(), _AT_FDCWD, os.fsencode(dst), _AT_SYMLINK_FOLLOW
        )
        != 0
    ):
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), dst)
