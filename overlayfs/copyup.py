"""Copying file contents without reading them into Python: reflink, then ``copy_file_range``, then a loop.

Used for copy-up (lower -> upper) and for staging promoted files (upper -> real tree).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat as stat_mod
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait

FICLONE = 0x40049409  # _IOW(0x94, 9, int): share extents (btrfs, xfs, bcachefs)
_FALLBACK_ERRNOS = {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EBADF, errno.ETXTBSY}
_CHUNK = 1 << 20


def copy_fd(src: int, dst: int) -> int:
    """Copy all of ``src`` (from offset 0) into ``dst`` (at its offset); returns the bytes copied.

    Every byte is accounted for: a short write is retried until the kernel says why it cannot go on
    (ENOSPC, EDQUOT, EIO, ... raised as OSError), and a copy that ends short of the source's size (the
    source shrank while it was copied) raises OSError(EIO) instead of reporting a full copy."""
    size = os.fstat(src).st_size
    start = os.lseek(dst, 0, os.SEEK_CUR)
    try:
        fcntl.ioctl(dst, FICLONE, src)
        os.lseek(dst, start + size, os.SEEK_SET)
        copied = size
    except OSError:
        copied = _copy_range(src, dst, size)
    _check_size(dst, start + copied, start + size)
    return copied


def _copy_range(src: int, dst: int, size: int) -> int:
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
    # Neither worked (e.g. across filesystems): stream from where we got to, writing each chunk whole
    # (one write() may take only part of it when the filesystem is nearly full).
    os.lseek(src, copied, os.SEEK_SET)
    while True:
        chunk = os.read(src, _CHUNK)
        if not chunk:
            return copied
        write_all(dst, chunk)
        copied += len(chunk)


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write all of ``data``: retry short writes; a write that takes nothing is ENOSPC."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n == 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[n:]


def _check_size(dst: int, end: int, want: int) -> None:
    if end < want:
        raise OSError(errno.EIO, f"short copy: {end} of {want} bytes (the source shrank while it was copied)")
    have = os.fstat(dst).st_size
    if have < end:
        raise OSError(errno.EIO, f"short copy: {have} of {end} bytes landed")


def copy_file(
    src: str,
    dst: str,
    *,
    mode: int | None = None,
    fsync: bool = False,
    times_ns: tuple[int, int] | None = None,
) -> int:
    """Copy regular file ``src`` to new file ``dst`` (must not exist), set ``mode`` (default: src's).

    Returns the number of bytes copied. ``fsync`` makes the data durable before a later rename. On any error
    (including one reported by fsync or close) ``dst`` is removed: a failed copy leaves no partial file.
    """
    sfd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(sfd)
        dfd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            n = copy_fd(sfd, dfd)
            os.fchmod(dfd, stat_mode(st.st_mode) if mode is None else mode)
            if times_ns is not None:
                os.utime(dfd, ns=times_ns)
            if fsync:
                os.fsync(dfd)
        except Exception:
            os.close(dfd)
            _remove_partial(dst)
            raise
        except BaseException:  # KeyboardInterrupt, or a simulated kill in a test: nothing more is done
            os.close(dfd)
            raise
        try:
            os.close(dfd)  # NFS and FUSE report some write errors only here
        except OSError:
            _remove_partial(dst)
            raise
    finally:
        os.close(sfd)
    return n


def link_or_copy(src: str, dst: str) -> bool:
    """A second name for the file or link ``src`` (promotion's backup of what a put replaces): a hard link,
    or a copy where links fail. False for a copy of a file: its data is not synced yet."""
    try:
        os.link(src, dst, follow_symlinks=False)
        return True
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK, errno.EXDEV, errno.ENOSYS):
            raise
    st = os.lstat(src)
    if stat_mod.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(src), dst)
        return True  # a name only, which the directory's sync covers
    copy_file(src, dst, mode=stat_mode(st.st_mode), times_ns=(st.st_atime_ns, st.st_mtime_ns))
    return False


def _remove_partial(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass  # gone already, or a read-only filesystem: the caller's cleanup (or recovery) reports it


def stat_mode(mode: int) -> int:
    return mode & 0o7777


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_pool: tuple[int, ThreadPoolExecutor] | None = None


def run_all(
    fn: Callable[..., object], calls: Sequence[tuple[object, ...]], *, threads: bool = True
) -> list[BaseException | None]:
    """Run ``fn(*args)`` for every args tuple concurrently (file I/O releases the GIL) and wait for all of
    them, also when one fails; returns each call's exception or None, in order. ``threads=False`` (calls
    that never wait for the disk) runs them one after the other: cheaper than handing each to a thread."""
    global _pool
    if len(calls) < 3 or not threads:
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
