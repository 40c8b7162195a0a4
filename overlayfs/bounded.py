"""A bounded upper layer: the overlay's ``upper/``, ``work/`` and ``tmp/`` on a private tmpfs of fixed size.

The filesystem enforces the bound, for every writer alike (kernel overlayfs, our FUSE server,
fuse-overlayfs, the pure view): a write or create past it fails with ENOSPC at once. The tmpfs is a
detached mount made by :mod:`overlayfs._tmpfs`, held by this process through one descriptor and reached
by path as ``/proc/<pid>/fd/<fd>`` (by this process and its children; a child in another user namespace
inherits the descriptor and uses ``/proc/self/fd/<fd>``). Nothing is mounted on the host, so nothing is
left behind when the process dies: the kernel frees the tmpfs with its last descriptor.
Its pages live in memory (swappable), so the byte bound is also what one speculation may cost in RAM;
each inode costs about 1 KiB of kernel memory, hence the inode bound. See docs/security.md.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from overlayfs.errors import OverlayError

GiB, MiB = 1 << 30, 1 << 20
HELPER = Path(__file__).with_name("_tmpfs.py")
LAYER_DIRS = ("upper", "work", "tmp")  # the overlay's upper and work dirs, and temp files renamed into upper


class LayerUnavailable(OverlayError, OSError):
    """No bounded filesystem can be made here (no fsopen, no user namespaces); the message says why."""


@dataclass(frozen=True, kw_only=True)
class LayerBound:
    """What one overlay's upper layer may hold: ``bytes`` of data and ``inodes`` entries (files,
    directories, links, whiteouts, and each extra hard link; the layer's own three directories count)."""

    bytes: int = 1 * GiB
    inodes: int = 100_000

    def __post_init__(self) -> None:
        for name in ("bytes", "inodes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"upper-layer bound {name} must be a positive integer, got {value!r}")
        if self.inodes < 16:
            raise ValueError(f"upper-layer bound inodes must be at least 16, got {self.inodes}")

    @property
    def headroom(self) -> tuple[int, int]:
        """Free (bytes, inodes) under which the layer counts as having reached its bound: a refused write
        leaves less than one page free, a refused create no inode; 1 MiB and 8 inodes of slack also catch
        a writer that freed a little before it was looked at, or one refused for asking more than was left."""
        return min(MiB, self.bytes // 16), 8


class LayerUsage(NamedTuple):
    bytes_used: int
    bytes_free: int
    inodes_used: int
    inodes_free: int


class BoundedLayer:
    """A fresh bounded filesystem holding ``upper/``, ``work/`` and ``tmp/``; :meth:`close` frees it."""

    def __init__(self, bound: LayerBound) -> None:
        self.bound = bound
        self.userns_fd: int | None = (
            None  # the tmpfs's user namespace (a normal user's), to mount overlays in
        )
        if os.geteuid() == 0:
            from overlayfs import _tmpfs

            try:
                self.fd = _tmpfs.make(bound.bytes, bound.inodes)
            except OSError as e:
                raise LayerUnavailable(
                    e.errno, f"cannot make the bounded upper layer (tmpfs): {e.strerror}"
                ) from None
        else:
            self.fd, self.userns_fd = _make_unprivileged(bound)
        self.path = f"/proc/{os.getpid()}/fd/{self.fd}"
        self.upper, self.work, self.tmp = (f"{self.path}/{d}" for d in LAYER_DIRS)
        try:
            for d in LAYER_DIRS:  # upper/ as an unbounded one would be made: its mode is the view root's
                os.mkdir(f"{self.path}/{d}", 0o777 if d == "upper" else 0o700)
        except OSError:
            self.close()
            raise
        self._closed = False

    def inherited(self, path: str) -> str:
        """``path`` (under :attr:`path`) as a child that inherits :attr:`fd` at the same number names it:
        ``/proc/self/fd/N/...``, which also works from another user namespace (``/proc/PID`` does not)."""
        return f"/proc/self/fd/{self.fd}" + path[len(self.path) :]

    def usage(self) -> LayerUsage:
        sv = os.statvfs(self.path)
        free = sv.f_bavail * sv.f_frsize
        return LayerUsage(sv.f_blocks * sv.f_frsize - free, free, sv.f_files - sv.f_ffree, sv.f_ffree)

    def at_bound(self, usage: LayerUsage | None = None) -> bool:
        """Whether the layer is (within the headroom) full: bytes or inodes."""
        u = usage or self.usage()
        bytes_room, inode_room = self.bound.headroom
        return u.bytes_free < bytes_room or u.inodes_free < inode_room

    def describe(self) -> str:
        return (
            f"upper layer on a private tmpfs: size={self.bound.bytes} bytes, nr_inodes={self.bound.inodes} "
            "(a write or create past either fails with ENOSPC)"
        )

    def close(self) -> None:
        """Drop this process's hold; the kernel frees the tmpfs once no mount or process uses it."""
        if getattr(self, "_closed", False):
            return
        self._closed = True
        for fd in (self.fd, self.userns_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def __del__(self) -> None:
        self.close()


def _make_unprivileged(bound: LayerBound) -> tuple[int, int]:
    """Run the helper in a user namespace of its own; returns (mount fd, user namespace fd)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with ours, theirs:
        try:
            proc = subprocess.run(
                [
                    sys.executable,
                    "-I",
                    "-S",
                    os.fspath(HELPER),
                    str(bound.bytes),
                    str(bound.inodes),
                    str(theirs.fileno()),
                ],
                pass_fds=(theirs.fileno(),),
                capture_output=True,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise LayerUnavailable(0, f"cannot make the bounded upper layer (tmpfs): {e}") from None
        theirs.close()
        ours.settimeout(5)
        try:
            msg, fds, _, _ = socket.recv_fds(ours, 512, 2)
        except OSError as e:
            msg, fds = f"E{e}".encode(), []
    for fd in fds:
        os.set_inheritable(fd, False)
    if msg[:1] != b"K" or len(fds) != 2:
        for fd in fds:
            os.close(fd)
        why = msg[1:].decode(errors="replace") or proc.stderr.decode(errors="replace").strip() or "no answer"
        raise LayerUnavailable(0, f"cannot make the bounded upper layer (a tmpfs in a user namespace): {why}")
    return fds[0], fds[1]
