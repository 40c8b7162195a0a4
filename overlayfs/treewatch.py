"""Watching the real tree for changes during a speculation: what the backends that cannot record reads
(kernel overlayfs, fuse-overlayfs) use instead of a snapshot of the whole project (issue #34 item 6).

Those backends count the whole project as read. A snapshot made that cost grow with the project at the
start (an ``lstat`` walk) and at acceptance (100,000 read records to load, each file hashed again). A
:class:`TreeWatch` keeps the same guarantee, "nothing in the project changed since the speculation's first
command", at a cost that grows with what changes:

- ``fanotify`` (root): one mark on each filesystem under the project (``FAN_MARK_FILESYSTEM`` with
  ``FAN_REPORT_DFID_NAME``); each event names a directory by file handle and an entry by name, resolved to a
  path once per directory (``open_by_handle_at``). Start costs a few syscalls whatever the project's size.
- ``inotify`` (anyone): a watch on every directory of the project, each added before the directory is
  listed (so that nothing made there meanwhile escapes it). Start lists the directories, not the files'
  inodes: it still grows with the project, about 10x less than the snapshot did, and holds no record per
  file.

Any event under the project (a write, truncate, chmod/chown/utimes/xattr, create, delete, rename, link) is
a change; so is a lost event (queue overflow), an unmounted filesystem, or a watch that is gone. The watch
stops listening at its first change (the answer can no longer become "unchanged"), which also ends the
cost of a busy filesystem's events. Events come synchronously from the writer's syscall, so a change
finished before :meth:`TreeWatch.seen` drains the queue is in it.

What no fsnotify watch sees, and so neither does this: a write through a shared ``mmap`` (no event; the
snapshot's ``lstat`` saw its mtime once the kernel updated it), and changes made by another host on a
network filesystem. ``SPECULATE_TREE_WATCH`` (``auto``, ``fanotify``, ``inotify`` or ``snapshot``) pins
the mechanism; ``snapshot`` (also what is used when neither watch can be made here) keeps the old walk.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import itertools
import os
import select
import struct
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

from overlayfs.errors import OverlayError
from overlayfs.walk import too_long

ENV = "SPECULATE_TREE_WATCH"
MODES = ("auto", "fanotify", "inotify", "snapshot")
MAX_PATHS = 20  # changed paths kept for the conflict message
# Directories whose path (or that they are elsewhere) a fanotify watch keeps by handle. Each new directory
# with events anywhere on the filesystem adds one (a REPL's speculations make a few per turn); past this the
# map starts again, which costs one open_by_handle_at per directory seen afterwards. Kept small so that a
# long session's memory stays flat (#37).
MAX_DIRS = 4096
MAX_IGNORED = 4096  # busy directories elsewhere whose events the kernel drops for a fanotify watch
LIVENESS_S = 1.0  # how often an idle watch asks whether anyone still needs it

_libc = ctypes.CDLL(None, use_errno=True)
_libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int, ctypes.c_char_p]
_libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
_AT_FDCWD = -100
_O_PATH = 0o10000000

# fanotify (linux/fanotify.h)
_FAN_CLOEXEC, _FAN_NONBLOCK, _FAN_UNLIMITED_QUEUE = 0x1, 0x2, 0x10
_FAN_REPORT_DFID_NAME = 0x400 | 0x800
_FAN_MARK_ADD, _FAN_MARK_FILESYSTEM = 0x1, 0x100
_FAN_MARK_IGNORED_SURV_MODIFY, _FAN_MARK_IGNORE, _FAN_EVENT_ON_CHILD = 0x40, 0x400, 0x08000000
_FAN_MODIFY, _FAN_ATTRIB, _FAN_MOVED_FROM, _FAN_MOVED_TO = 0x2, 0x4, 0x40, 0x80
_FAN_CREATE, _FAN_DELETE, _FAN_Q_OVERFLOW, _FAN_ONDIR = 0x100, 0x200, 0x4000, 0x40000000
_FAN_MASK = (
    _FAN_MODIFY | _FAN_ATTRIB | _FAN_MOVED_FROM | _FAN_MOVED_TO | _FAN_CREATE | _FAN_DELETE | _FAN_ONDIR
)
_FID_INFOS = {1: False, 2: True, 3: False, 10: True, 12: True}  # info type -> followed by a name
_META = struct.Struct("=IBBHQii")
_INFO = struct.Struct("=BBH")
_U32 = struct.Struct("=I")

# inotify (linux/inotify.h)
_IN_NONBLOCK, _IN_CLOEXEC = 0o4000, 0o2000000
_IN_MODIFY, _IN_ATTRIB, _IN_MOVED_FROM, _IN_MOVED_TO = 0x2, 0x4, 0x40, 0x80
_IN_CREATE, _IN_DELETE, _IN_DELETE_SELF, _IN_MOVE_SELF = 0x100, 0x200, 0x400, 0x800
_IN_UNMOUNT, _IN_Q_OVERFLOW, _IN_ONLYDIR = 0x2000, 0x4000, 0x01000000
_IN_MASK = (
    _IN_MODIFY
    | _IN_ATTRIB
    | _IN_MOVED_FROM
    | _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE
    | _IN_DELETE_SELF
    | _IN_MOVE_SELF
    | _IN_ONLYDIR
)
_IN_EVENT = struct.Struct("=iIII")
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW


class Unwatchable(OverlayError, OSError):
    """No watch of this kind can be made on this tree here (the caller falls back)."""


@dataclass(frozen=True)
class Seen:
    """What a watch saw: the paths changed (relative, ``"."`` for the root; the first :data:`MAX_PATHS`), and
    why it can no longer vouch for the tree at all (None: it can)."""

    paths: tuple[str, ...] = ()
    lost: str | None = None

    @property
    def clean(self) -> bool:
        return not self.paths and self.lost is None


_LIVE: dict[str, TreeWatch] = {}
_LIVE_LOCK = threading.Lock()
_COUNTER = itertools.count(1)


def mode() -> str:
    """The mechanism :data:`ENV` asks for; ValueError naming the variable for anything else."""
    want = os.environ.get(ENV) or "auto"
    if want not in MODES:
        raise ValueError(f"{ENV}={want!r}: expected one of {', '.join(MODES)}")
    return want


def start(root: str | os.PathLike[str]) -> TreeWatch | None:
    """A watch of ``root``'s tree from now on: fanotify where it can be made, else inotify; None where
    neither can (or :data:`ENV` says ``snapshot``): the caller snapshots the tree instead."""
    want = mode()
    kinds = {"auto": (FanotifyWatch, InotifyWatch), "fanotify": (FanotifyWatch,), "inotify": (InotifyWatch,)}
    for kind in kinds.get(want, ()):
        try:
            return kind(os.path.realpath(root))
        except (Unwatchable, OSError):
            continue
    return None


def lookup(token: str) -> TreeWatch | None:
    with _LIVE_LOCK:
        return _LIVE.get(token)


def seen(token: str) -> Seen:
    """What the watch ``token`` (a read record's) saw so far; a watch this process no longer has (another
    process's, or closed) vouches for nothing."""
    w = lookup(token)
    if w is None:
        return Seen(lost="the real tree is no longer watched (the watch of this speculation is gone)")
    return w.seen()


class TreeWatch:
    """Changes under ``root`` since this was made. :meth:`hold` and :meth:`attach` say who needs it; it closes
    itself once neither does (the holder is gone and the read record naming it is no longer there)."""

    how = ""

    def __init__(self, root: str, fd: int) -> None:
        self.root = root
        self.token = f"{self.how}-{os.getpid()}-{next(_COUNTER)}-{os.urandom(4).hex()}"
        self._fd: int | None = fd
        self._lock = threading.Lock()
        self._paths: list[str] = []
        self._lost: str | None = None
        self._holder: weakref.ref[object] | None = None
        self._records: Path | None = None  # the reads file that names this watch
        self._records_seen: tuple[float, int] | None = None
        self._stop = threading.Event()
        with _LIVE_LOCK:
            _LIVE[self.token] = self
        threading.Thread(target=self._loop, name=f"treewatch-{self.how}", daemon=True).start()

    # -- who needs it ----------------------------------------------------------------------------------
    def hold(self, holder: object) -> None:
        """Keep the watch while ``holder`` lives (the session's snapshot object)."""
        self._holder = weakref.ref(holder)

    def attach(self, reads_file: Path) -> None:
        """Keep the watch while ``reads_file`` names it (a full promotion empties it, a discard removes it)."""
        self._records = reads_file

    def _needed(self) -> bool:
        if self._holder is not None and self._holder() is not None:
            return True
        f = self._records
        if f is None:
            return False
        try:
            st = os.stat(f)
        except OSError:
            return False
        key = (st.st_mtime, st.st_size)
        if key != self._records_seen:  # read again only when it changed
            self._records_seen = key
            try:
                return self.token.encode() in f.read_bytes()
            except OSError:
                return False
        return True

    # -- what it saw -----------------------------------------------------------------------------------
    def seen(self) -> Seen:
        """Drain what is queued now, then answer."""
        with self._lock:
            self._drain()
            return Seen(tuple(self._paths), self._lost)

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            self._close_fd()
            if self._lost is None and not self._paths:
                self._lost = "the watch of the real tree was closed"
        with _LIVE_LOCK:
            _LIVE.pop(self.token, None)

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _loop(self) -> None:
        checked = time.monotonic()
        while not self._stop.is_set():
            fd = self._fd
            if fd is not None:
                try:
                    ready, _, _ = select.select([fd], [], [], LIVENESS_S)
                except (OSError, ValueError):  # closed under us
                    ready = []
                if ready:
                    with self._lock:
                        self._drain()
            else:
                self._stop.wait(LIVENESS_S)
            if time.monotonic() - checked >= LIVENESS_S:  # also while a busy filesystem keeps it reading
                checked = time.monotonic()
                if not self._needed():
                    self.close()

    def _drain(self) -> None:
        """Read every queued event (the caller holds the lock); at the first change, stop listening."""
        while self._fd is not None:
            try:
                buf = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                return
            except OSError as e:
                self._lost = f"the watch of the real tree failed: {e.strerror}"
                self._close_fd()
                return
            self._parse(buf)
            if self._paths or self._lost is not None:
                self._close_fd()  # the answer is final: no need to hear the filesystem's other events

    def _change(self, path: str) -> None:
        rel = self._relative(path)
        if rel is not None and len(self._paths) < MAX_PATHS and rel not in self._paths:
            self._paths.append(rel)

    def _relative(self, path: str) -> str | None:
        if path == self.root:
            return "."
        if path.startswith(self.root + "/"):
            return path[len(self.root) + 1 :]
        return None

    def _parse(self, buf: bytes) -> None:
        raise NotImplementedError


def _errno_error(what: str) -> OSError:
    err = ctypes.get_errno()
    return Unwatchable(err, f"{what}: {os.strerror(err)}")


def _submounts(root: str) -> list[str]:
    """Mount points strictly beneath ``root`` (another filesystem's events need a mark of their own)."""
    out = []
    with contextlib.suppress(OSError), open("/proc/self/mountinfo", "rb") as f:
        for line in f:
            point = line.split(b" ")[4].decode("unicode_escape").encode("latin-1")  # octal escapes
            p = os.fsdecode(point)
            if p.startswith(root + "/"):
                out.append(p)
    return out


class FanotifyWatch(TreeWatch):
    """One ``FAN_MARK_FILESYSTEM`` per filesystem under the project (needs CAP_SYS_ADMIN)."""

    how = "fanotify"

    def __init__(self, root: str) -> None:
        if os.geteuid() != 0:
            raise Unwatchable(errno.EPERM, "fanotify filesystem marks need root")
        flags = _FAN_CLOEXEC | _FAN_NONBLOCK | _FAN_UNLIMITED_QUEUE | _FAN_REPORT_DFID_NAME
        fd = _libc.fanotify_init(flags, os.O_RDONLY | os.O_CLOEXEC)
        if fd < 0:
            raise _errno_error("fanotify_init")
        self._mounts: list[int] = []
        self._dirs: dict[bytes, str | None] = {}
        self._parent = os.path.dirname(root)
        self._ignored = 0
        try:
            for point in [root, *_submounts(root)]:
                if _libc.fanotify_mark(fd, _FAN_MARK_ADD | _FAN_MARK_FILESYSTEM, _FAN_MASK, _AT_FDCWD,
                                       os.fsencode(point)) != 0:  # fmt: skip
                    raise _errno_error(f"fanotify_mark {point}")
                self._mounts.append(os.open(point, _DIR))
        except BaseException:
            os.close(fd)
            for m in self._mounts:
                os.close(m)
            raise
        super().__init__(root, fd)

    def _close_fd(self) -> None:
        super()._close_fd()
        for m in self._mounts:
            os.close(m)
        self._mounts = []

    def _dir_path(self, handle: bytes) -> str | None:
        """The path of the directory with file ``handle`` now, if an event there can concern the project (it
        is the root, beneath it, or the root's parent); else None, as for a directory already gone: its
        deletion or its move out was itself an event in its parent, which names it. Cached by handle: one
        ``open_by_handle_at`` per directory, however busy the filesystem."""
        if handle in self._dirs:
            return self._dirs[handle]
        path = None
        buf = ctypes.create_string_buffer(handle, len(handle))
        for m in self._mounts:
            fd = _libc.open_by_handle_at(m, buf, _O_PATH | os.O_CLOEXEC)
            if fd >= 0:
                try:
                    path = os.readlink(f"/proc/self/fd/{fd}")
                finally:
                    os.close(fd)
                break
        if path is not None and path != self._parent and self._relative(path) is None:
            path = None  # elsewhere on the filesystem
            self._ignore(buf)
        if len(self._dirs) >= MAX_DIRS:  # a busy filesystem's many directories: start again (memory flat)
            self._dirs.clear()
        self._dirs[handle] = path
        return path

    def _ignore(self, handle: ctypes.Array[ctypes.c_char]) -> None:
        """Have the kernel drop the events of a busy directory elsewhere on the filesystem (an ignore mark on
        it for its entries, kept across their writes; Linux 6.0). A directory moved into the project later
        is itself an event there; best effort, bounded: without it the events are only read and dropped."""
        if self._ignored >= MAX_IGNORED or self._fd is None:
            return
        for m in self._mounts:
            fd = _libc.open_by_handle_at(m, handle, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            if fd >= 0:
                try:
                    flags = _FAN_MARK_ADD | _FAN_MARK_IGNORE | _FAN_MARK_IGNORED_SURV_MODIFY
                    if _libc.fanotify_mark(self._fd, flags, _FAN_MASK | _FAN_EVENT_ON_CHILD, fd, None) == 0:
                        self._ignored += 1
                finally:
                    os.close(fd)
                return

    def _parse(self, buf: bytes) -> None:
        # Per event: the header, and the directory's handle looked up (most events are elsewhere on the
        # filesystem: nothing more is decoded for them).
        i, n, unpack, info = 0, len(buf), _META.unpack_from, _INFO.unpack_from
        while i + 24 <= n:
            event_len, _, _, meta_len, mask, efd, _ = unpack(buf, i)
            if efd >= 0:
                os.close(efd)
            if mask & _FAN_Q_OVERFLOW:
                self._lost = "the watch of the real tree lost events (its queue overflowed)"
            j, end = i + meta_len, i + event_len
            while j + 4 <= end:
                info_type, _, info_len = info(buf, j)
                if info_type in _FID_INFOS and info_len >= 20:
                    (size,) = _U32.unpack_from(buf, j + 12)
                    directory = self._dir_path(buf[j + 12 : j + 20 + size])
                    if directory is not None:
                        name = b""
                        if _FID_INFOS[info_type]:
                            name = buf[j + 20 + size : j + info_len].split(b"\0", 1)[0]
                        self._change(directory + ("/" + os.fsdecode(name) if name and name != b"." else ""))
                j += max(info_len, 4)
            i += max(event_len, 24)


class InotifyWatch(TreeWatch):
    """A watch on each directory of the project, added before it is listed."""

    how = "inotify"

    def __init__(self, root: str) -> None:
        fd = _libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            raise _errno_error("inotify_init1")
        self._wds: dict[int, str] = {}
        try:
            self._watch_all(fd, root)
        except BaseException:
            os.close(fd)
            raise
        super().__init__(root, fd)

    def _watch_all(self, fd: int, root: str) -> None:
        rootfd = os.open(root, _DIR)
        try:
            stack = [""]
            while stack:
                rel = stack.pop()
                if too_long(rel):
                    raise Unwatchable(errno.ENAMETOOLONG, f"a directory too deep to watch: {rel[:120]}...")
                try:
                    dfd = os.open(rel, _DIR, dir_fd=rootfd) if rel else rootfd
                except (FileNotFoundError, NotADirectoryError):
                    continue  # gone before its watch: its parent's watch saw it go
                try:
                    wd = _libc.inotify_add_watch(fd, f"/proc/self/fd/{dfd}".encode(), _IN_MASK)
                    if wd < 0:
                        raise _errno_error(f"inotify_add_watch {root}/{rel}")
                    self._wds[wd] = f"{root}/{rel}" if rel else root
                    with os.scandir(dfd) as it:
                        subdirs = [e.name for e in it if e.is_dir(follow_symlinks=False)]
                finally:
                    if dfd != rootfd:
                        os.close(dfd)
                stack.extend(f"{rel}/{n}" if rel else n for n in subdirs)
        finally:
            os.close(rootfd)

    def _parse(self, buf: bytes) -> None:
        i = 0
        while i + _IN_EVENT.size <= len(buf):
            wd, mask, _, size = _IN_EVENT.unpack_from(buf, i)
            name = bytes(buf[i + _IN_EVENT.size : i + _IN_EVENT.size + size]).split(b"\0", 1)[0]
            i += _IN_EVENT.size + size
            if mask & _IN_Q_OVERFLOW:
                self._lost = "the watch of the real tree lost events (its queue overflowed)"
                continue
            if mask & _IN_UNMOUNT:
                self._lost = "a filesystem under the project was unmounted"
            directory = self._wds.get(wd)
            if directory is not None:
                self._change(directory + ("/" + os.fsdecode(name) if name else ""))
