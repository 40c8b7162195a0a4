"""Mounting an empty FUSE filesystem on ``/dev/fuse`` and unmounting it: root with mount(2), anyone else
through fusermount3 (libfuse's descriptor hand-off); and abandoning it when the owner is gone."""

from __future__ import annotations

import contextlib
import ctypes
import os
import subprocess
from pathlib import Path
from typing import NoReturn

_libc = ctypes.CDLL(None, use_errno=True)
_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 2, 4, 2


def mount_device(root: Path, *, fsname: str, subtype: str) -> int:
    """Mount an empty FUSE filesystem at ``root``; returns its ``/dev/fuse`` descriptor. Root mounts it
    itself; anyone else through fusermount3 (libfuse's protocol: the descriptor comes back over the socket
    named by ``_FUSE_COMMFD``)."""
    import socket

    if os.geteuid() == 0:
        fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
        data = f"fd={fd},rootmode=40000,user_id=0,group_id=0,default_permissions,allow_other"
        if _libc.mount(
            fsname.encode(),
            os.fsencode(root),
            f"fuse.{subtype}".encode(),
            ctypes.c_ulong(_MS_NOSUID | _MS_NODEV),
            data.encode(),
        ):
            err = ctypes.get_errno()
            os.close(fd)
            raise OSError(err, f"mounting FUSE at {root}: {os.strerror(err)}")
        return fd
    opts = f"rw,nosuid,nodev,default_permissions,subtype={subtype},fsname={fsname}"
    ours, theirs = socket.socketpair()
    with ours, theirs:
        r = subprocess.run(
            ["fusermount3", "-o", opts, "--", os.fspath(root)],
            capture_output=True,
            timeout=30,
            env={**os.environ, "_FUSE_COMMFD": str(theirs.fileno())},
            pass_fds=(theirs.fileno(),),
        )
        if r.returncode != 0:
            raise OSError(0, f"fusermount3 failed: {r.stderr.decode(errors='replace').strip()}")
        theirs.close()
        ours.settimeout(10)
        _, fds, _, _ = socket.recv_fds(ours, 1, 1)
    if not fds:
        raise OSError(0, "fusermount3 handed over no FUSE descriptor")
    return fds[0]


def abandon(root: Path) -> NoReturn:
    """End this server now (its owner is gone): unmount lazily and exit the process, whatever a request is
    doing. Exiting closes the ``/dev/fuse`` descriptor, which aborts the connection: a process waiting on a
    request is answered ENOTCONN instead of sleeping uninterruptibly on a server that may never answer."""
    try:
        unmount_lazily(root)
    finally:
        os._exit(0)


def unmount_lazily(root: Path) -> None:
    if os.geteuid() == 0:
        if _libc.umount2(os.fsencode(root), _MNT_DETACH) == 0:
            return
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        subprocess.run(["fusermount3", "-u", "-z", os.fspath(root)], capture_output=True, timeout=30)
