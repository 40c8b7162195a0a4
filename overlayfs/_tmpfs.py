"""Making the filesystem a bounded upper layer lives on: a tmpfs with ``size=`` and ``nr_inodes=`` that is
mounted nowhere (a detached mount from ``fsmount``, held by a file descriptor and freed with its last one).

Standalone (stdlib only). Root calls :func:`make` in its own process. A normal user cannot make a tmpfs in
the host's namespaces, so it runs this file as ``python -I -S _tmpfs.py BYTES INODES SOCKFD``: the child
enters a new user namespace (mapping the caller's uid and gid to themselves) and mount namespace, makes
the tmpfs there (it then belongs to that user namespace) and sends the mount's descriptor and the user
namespace's descriptor back over the unix socket SOCKFD, then exits. Whoever later mounts an overlay on
the layer joins that user namespace first (:mod:`overlayfs._nsexec`).
"""

from __future__ import annotations

import _socket  # not socket: its import (enum, selectors) costs 10 ms
import array
import ctypes
import os
import sys

_FSOPEN, _FSCONFIG, _FSMOUNT = 430, 431, 432  # the same on every architecture (the unified table)
_FSOPEN_CLOEXEC, _FSMOUNT_CLOEXEC = 1, 1
_SET_STRING, _CMD_CREATE = 1, 6
_MOUNT_ATTR_NOSUID, _MOUNT_ATTR_NODEV = 0x2, 0x4
_CLONE_NEWNS, _CLONE_NEWUSER = 0x00020000, 0x10000000
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _check(rc: int, what: str) -> int:
    if rc < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return rc


def make(size: int, inodes: int) -> int:
    """A detached tmpfs of ``size`` bytes and ``inodes`` inodes, mode 0700; returns its mount descriptor."""
    fs = _check(_libc.syscall(_FSOPEN, b"tmpfs", _FSOPEN_CLOEXEC), "fsopen tmpfs")
    try:
        for key, value in (("size", str(size)), ("nr_inodes", str(inodes)), ("mode", "0700")):
            _check(_libc.syscall(_FSCONFIG, fs, _SET_STRING, key.encode(), value.encode(), 0), f"tmpfs {key}")
        _check(_libc.syscall(_FSCONFIG, fs, _CMD_CREATE, None, None, 0), "tmpfs create")
        return _check(
            _libc.syscall(_FSMOUNT, fs, _FSMOUNT_CLOEXEC, _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NODEV), "fsmount"
        )
    finally:
        os.close(fs)


def _own_namespace() -> None:
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS), "unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def main() -> int:
    size, inodes, sock = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    out = _socket.socket(fileno=sock)
    try:
        _own_namespace()
        mnt = make(size, inodes)
        userns = os.open("/proc/self/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        out.sendall(f"E{e}".encode())
        return 1
    out.sendmsg([b"K"], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, array.array("i", [mnt, userns]).tobytes())])
    return 0


if __name__ == "__main__":
    sys.exit(main())
