"""Copying file contents without reading them into Python: reflink, then ``copy_file_range``, then a loop.

Used for copy-up (lower -> upper) and for staging promoted files (upper -> real tree).
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait

FICLONE = 0x40049409  # _IOW(0x94, 9, int): share extents (btrfs, xfs, bcachefs)
_FALLBACK_ERRNOS = {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EBADF, errno.ETXTBSY}
_CHUNK = 1 << 20


def copy_fd(src: int, dst: int) -> int:
    """Copy all of ``src`` (from offset 0) into ``dst`` (at its offset); returns the bytes copied."""
    size = os.fstat(src).st_size
    try:
        fcntl.ioctl(dst, FICLONE, src)
        return size
    except OSError:
        pass
    copied = 0
    try:
        while True:
            n = os.copy_file_range(src, dst, 1 << 30)
            if n == 0:
                return copied
            copied += n
    except OSError as e:
        if e.errno not in _FALLBACK_ERRNOS:
            raise
    # Neither worked (e.g. across filesystems on an old kernel): stream from where we got to.
    with os.fdopen(os.dup(src), "rb") as fs, os.fdopen(os.dup(dst), "wb", buffering=0) as fd:
        fs.seek(copied)
        fd.seek(copied)
        shutil.copyfileobj(fs, fd, _CHUNK)
    return size


def copy_file(src: str, dst: str, *, mode: int | None = None, fsync: bool = False,
              times_ns: tuple[int, int] | None = None) -> int:
    """Copy regular file ``src`` to new file ``dst`` (must not exist), set ``mode`` (default: src's).

    Returns the number of bytes copied. ``fsync`` makes the data durable before a later rename.
    """
    sfd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        st = os.fstat(sfd)
        dfd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            n = copy_fd(sfd, dfd)
            os.fchmod(dfd, stat_mode(st.st_mode) if mode is None else mode)
            if times_ns is not None:
                os.utime(dfd, ns=times_ns)
            if fsync:
                os.fsync(dfd)
        finally:
            os.close(dfd)
    finally:
        os.close(sfd)
    return n


def stat_mode(mode: int) -> int:
    return mode & 0o7777


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_pool: tuple[int, ThreadPoolExecutor] | None = None


def run_all(fn: Callable[..., object], calls: Sequence[tuple[object, ...]]) -> list[BaseException | None]:
    """Run ``fn(*args)`` for every args tuple concurrently (file I/O releases the GIL) and wait for all of
    them, also when one fails; returns each call's exception or None, in order."""
    global _pool
    if len(calls) < 3:
        out: list[BaseException | None] = []
        for args in calls:
            try:
                fn(*args)
                out.append(None)
            except Exception as e:
                out.append(e)
        return out
    if _pool is None or _pool[0] != os.getpid():  # a pool's threads do not survive fork()
        _pool = (os.getpid(), ThreadPoolExecutor(max_workers=8, thread_name_prefix="overlayfs-io"))
    futures = [_pool[1].submit(fn, *args) for args in calls]
    wait(futures)
    return [f.exception() for f in futures]


def fsync_all(paths: Iterable[str]) -> None:
    """fsync files and directories by path, concurrently: the filesystem commits its journal once for
    many of them instead of once each (ext4 and xfs group concurrent fsyncs)."""
    for e in run_all(_fsync_path, [(p,) for p in paths]):
        if e is not None:
            raise e


def _fsync_path(path: str) -> None:  # a file or a directory
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
