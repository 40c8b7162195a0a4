"""Copying file contents without reading them into Python: reflink, then ``copy_file_range``, then a loop.

Used for copy-up (lower -> upper) and for staging promoted files (upper -> real tree). Holes stay holes:
only the source's data extents (``SEEK_DATA``/``SEEK_HOLE``) are copied and the end is set by ``ftruncate``,
as the kernel's own overlayfs copy-up does, so a 512 MiB file with 8 KiB of data lands as 8 KiB of blocks
(``copy_file_range`` on its own writes the holes out as zeros on ext4 and tmpfs).
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


def copy_fd(src: int, dst: int, *, sparse: bool = False) -> int:
    """Copy all of ``src`` (from offset 0) into ``dst`` (at its offset); returns the bytes copied (holes
    included: the length of the range written, which holds the source's holes as holes).

    Every byte is accounted for: a short write is retried until the kernel says why it cannot go on
    (ENOSPC, EDQUOT, EIO, ... raised as OSError), and a copy that ends short of the source's size (the
    source shrank while it was copied) raises OSError(EIO) instead of reporting a full copy. ``sparse``:
    leave all-zero blocks unwritten also where the source has none (see :func:`_copy_sparse`)."""
    size = os.fstat(src).st_size
    start = os.lseek(dst, 0, os.SEEK_CUR)
    try:
        fcntl.ioctl(dst, FICLONE, src)
        copied = size
    except OSError:
        copied = _copy_sparse(src, dst, start, size, sparse)
    os.lseek(dst, start + copied, os.SEEK_SET)
    _check_size(dst, start + copied, start + size)
    return copied


def _copy_sparse(src: int, dst: int, start: int, size: int, sparse: bool) -> int:
    """Copy the data extents of ``src`` below ``size`` to ``dst`` at ``start`` + their offset, then extend
    ``dst`` to ``start + size`` (a trailing hole); returns how far the copy got."""
    st = os.fstat(src)
    # A source with holes may also hold zeros written out where it had holes (kernel overlayfs copies up
    # in 1 MiB chunks from each data extent's start): those blocks are skipped too, as ``cp --sparse``
    # does; so are they where the caller says the file it replaces had holes (fuse-overlayfs' copy-up
    # writes them all out). Any other source is copied in the kernel, never read here.
    copy = _copy_nonzero if sparse or st.st_blocks * 512 < size else _copy_range
    off = 0
    while off < size:
        try:
            data = os.lseek(src, off, os.SEEK_DATA)
        except OSError as e:
            if e.errno != errno.ENXIO:  # ENXIO: no data past ``off``, the rest is a hole
                raise
            data = size
        if data >= size:
            break
        try:
            hole = min(os.lseek(src, data, os.SEEK_HOLE), size)
        except OSError as e:
            if e.errno != errno.ENXIO:
                raise
            return data  # the source shrank below ``data`` meanwhile: a short copy, reported by the caller
        got = copy(src, dst, data, start + data, hole - data)
        if got < hole - data:
            return data + got  # the source ended early (shrank)
        off = hole
    if os.fstat(src).st_size < size:
        return min(off, os.fstat(src).st_size)  # shrank while its holes were skipped
    if os.fstat(dst).st_size < start + size:
        os.ftruncate(dst, start + size)  # the trailing hole: a length, no blocks
    return size


def _copy_range(src: int, dst: int, soff: int, doff: int, count: int) -> int:
    """Copy ``count`` bytes from ``src`` at ``soff`` to ``dst`` at ``doff``: in the kernel, else by a loop
    (e.g. across filesystems); returns the bytes copied (fewer: the source ended)."""
    copied = 0
    try:
        while copied < count:
            n = os.copy_file_range(src, dst, min(count - copied, 1 << 30), soff + copied, doff + copied)
            if n == 0:
                return copied
            copied += n
        return copied
    except OSError as e:
        if e.errno not in _FALLBACK_ERRNOS:
            raise
    # Neither worked: stream from where we got to, writing each chunk whole (one write() may take only
    # part of it when the filesystem is nearly full).
    while copied < count:
        chunk = os.pread(src, min(_CHUNK, count - copied), soff + copied)
        if not chunk:
            return copied
        _pwrite_all(dst, memoryview(chunk), doff + copied)
        copied += len(chunk)
    return copied


_BLOCK = 4096
_ZERO = bytes(_CHUNK)


def _copy_nonzero(src: int, dst: int, soff: int, doff: int, count: int) -> int:
    """As :func:`_copy_range`, leaving every all-zero 4 KiB block unwritten (a hole in ``dst``)."""
    copied = 0
    while copied < count:
        chunk = os.pread(src, min(_CHUNK, count - copied), soff + copied)
        if not chunk:
            return copied
        view = memoryview(chunk)
        if chunk != _ZERO[: len(chunk)]:
            b = 0
            while b < len(chunk):
                if view[b : b + _BLOCK] == _ZERO[: len(view[b : b + _BLOCK])]:
                    b += _BLOCK
                    continue
                e = b + _BLOCK
                while e < len(chunk) and view[e : e + _BLOCK] != _ZERO[: len(view[e : e + _BLOCK])]:
                    e += _BLOCK
                _pwrite_all(dst, view[b:e], doff + copied + b)
                b = e
        copied += len(chunk)
    return copied


def _pwrite_all(fd: int, view: memoryview, off: int) -> None:
    while view:
        n = os.pwrite(fd, view, off)
        if n == 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view, off = view[n:], off + n


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
    owner: tuple[int, int] | None = None,
    sparse: bool = False,
    keep_xattrs: tuple[str, ...] = (),
) -> int:
    """Copy regular file ``src`` to new file ``dst`` (must not exist), set ``owner`` (uid, gid; default:
    the creator's) and ``mode`` (default: src's), in that order: a chown clears set-id bits.
    ``keep_xattrs``: carry over its extended attributes whose names start so (:data:`ALL_XATTRS` for a
    copy-up, as the kernel's; :data:`LANDED_XATTRS` for promotion).

    Returns the number of bytes copied. ``fsync`` makes the data durable before a later rename. On any error
    (including one reported by fsync or close) ``dst`` is removed: a failed copy leaves no partial file.
    """
    sfd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(sfd)
        dfd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            n = copy_fd(sfd, dfd, sparse=sparse)
            if keep_xattrs:
                copy_xattrs(sfd, dfd, keep_xattrs)
            if owner is not None:
                os.fchown(dfd, *owner)
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


ALL_XATTRS = ("",)
ACL = "system.posix_acl_access"
# Names of the overlay's own layer markers (overlayfs.layer) and fuse-overlayfs': never carried over.
_MARKERS = ("trusted.overlay.", "user.overlay.", "user.fuseoverlayfs.")
_NO_XATTRS = (errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENODATA, errno.EPERM, errno.EACCES, errno.E2BIG)


def xattrs(f: int | str) -> dict[str, bytes]:
    """The extended attributes of a descriptor or (not followed) path, ACLs included, the overlay's markers
    left out; empty where the filesystem has none or they cannot be read."""
    follow = isinstance(f, int)
    try:
        names = os.listxattr(f, follow_symlinks=follow)
    except OSError as e:
        if e.errno in _NO_XATTRS:
            return {}
        raise
    out = {}
    for name in names:
        if name.startswith(_MARKERS):
            continue
        try:
            out[name] = os.getxattr(f, name, follow_symlinks=follow)
        except OSError as e:
            if e.errno not in _NO_XATTRS:
                raise
    return out


def copy_xattrs(src: int, dst: int, prefixes: tuple[str, ...] = ("",)) -> None:
    """Carry ``src``'s extended attributes over to ``dst`` as the kernel's overlayfs copy-up does, each
    where this process may set it (a normal user cannot set ``trusted.*``; a filesystem without xattrs
    none): best effort, for a missing one only means promotion lands the file as a replacement."""
    for name, value in xattrs(src).items():
        if not name.startswith(prefixes):
            continue
        try:
            os.setxattr(dst, name, value)
        except OSError as e:
            if e.errno not in _NO_XATTRS and e.errno != errno.EINVAL:
                raise


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
    copy_file(
        src,
        dst,
        mode=stat_mode(st.st_mode),
        times_ns=(st.st_atime_ns, st.st_mtime_ns),
        owner=(st.st_uid, st.st_gid) if os.geteuid() == 0 else None,  # undo puts it back as it was
    )
    return False


def _remove_partial(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass  # gone already, or a read-only filesystem: the caller's cleanup (or recovery) reports it


def kept_owner(new: os.stat_result, old: os.stat_result | None) -> tuple[int, int] | None:
    """The owner a promoted file lands with where it replaces ``old`` (None: as created). Running as root
    on someone else's file, a replacement keeps the old owner and group as a live ``sed -i`` or editor
    does (they fchown; in the sandbox, without capabilities, they cannot), unless the fork's file carries
    another owner than ours (a ``chown`` in the fork, or a copy-up that kept it): then that one. A normal
    user cannot give files away, and lands them as their own, as live."""
    if old is None or os.geteuid() != 0:
        return None
    uid = new.st_uid if new.st_uid != os.geteuid() else old.st_uid
    gid = new.st_gid if new.st_gid != os.getegid() else old.st_gid
    return None if (uid, gid) == (os.geteuid(), os.getegid()) else (uid, gid)


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
