"""Stage one of a sandboxed command: join its cgroups, mount the kernel overlay privately, exec the rest.

Standalone (stdlib only, run as ``python -I -S _nsexec.py SPEC_JSON``) so that starting it costs one bare
interpreter. SPEC keys: ``cgroups`` (``cgroup.procs`` files to join first, so that every process of the
sandbox is counted), ``target`` and ``source`` (``{"overlay": {lowerdir, upperdir, workdir}}``: mount the
kernel overlay at ``target`` in a new mount namespace, with a user namespace too when not root;
``{"bind": path}`` or absent: mount nothing) and ``argv`` (exec'd last: bubblewrap, which builds the
sandbox proper on top of this namespace, or a probe command).

A bounded upper layer (:mod:`overlayfs.bounded`) of a normal user belongs to a user namespace of its own:
``userns`` (an inherited descriptor) is joined instead of making a new one, so that the overlay may be
mounted on it. The layer is named as ``/proc/self/fd/N`` (its descriptor inherited: another process's
``/proc/PID/fd`` is not reachable from that namespace); ``close`` lists the descriptors closed before the
exec, so that nothing of the layer reaches the sandbox but the overlay mounted on it. The same program starts fuse-overlayfs on a bounded layer: ``attach`` (``{"from": path,
"at": dir}``) clones the layer's mount onto ``dir`` in the private namespace (fuse-overlayfs needs real
paths), and ``handoff`` (an inherited unix socket) says "r" once the namespace is ready, then receives the
FUSE device descriptor of the mount made on the host, which replaces ``{fd}`` in ``argv``.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_REC, MS_PRIVATE = 16384, 1 << 18
_OPEN_TREE, _MOVE_MOUNT = 428, 429  # the same on every architecture
_OPEN_TREE_CLONE, _AT_EMPTY_PATH, _MOVE_MOUNT_F_EMPTY_PATH, _O_CLOEXEC = 1, 0x1000, 4, 0o2000000
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(
        _libc.mount(
            None if src is None else os.fsencode(src),
            os.fsencode(target),
            None if fstype is None else fstype.encode(),
            ctypes.c_ulong(flags),
            None if data is None else data.encode(),
        ),
        f"mount {target}",
    )


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _private_namespace(userns: int | None) -> None:
    euid, egid = os.geteuid(), os.getegid()
    if userns is not None:  # the bounded layer's: all capabilities there, the same uid as outside
        _check(_libc.setns(userns, CLONE_NEWUSER), "setns to the upper layer's user namespace")
        os.close(userns)
        _check(_libc.unshare(CLONE_NEWNS), "unshare")
    else:
        _check(_libc.unshare(CLONE_NEWNS | (CLONE_NEWUSER if euid != 0 else 0)), "unshare")
        if euid != 0:  # root of a namespace of our own, only to mount: bwrap drops it again
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"0 {euid} 1")
            _write("/proc/self/gid_map", f"0 {egid} 1")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing mounted here propagates to the host


def _mount_overlay(target: str, o: dict[str, str]) -> None:
    opts = f"lowerdir={o['lowerdir']},upperdir={o['upperdir']},workdir={o['workdir']}"
    if os.geteuid() != 0:
        opts += ",userxattr"
    _mount("speculate-overlay", target, "overlay", 0, opts)


def _attach(src: str, at: str) -> None:
    tree = _libc.syscall(_OPEN_TREE, -100, os.fsencode(src), _OPEN_TREE_CLONE | _O_CLOEXEC)
    _check(0 if tree >= 0 else -1, f"open_tree {src}")
    try:
        _check(
            _libc.syscall(_MOVE_MOUNT, tree, b"", -100, os.fsencode(at), _MOVE_MOUNT_F_EMPTY_PATH),
            f"move_mount {at}",
        )
    finally:
        os.close(tree)


def _handoff(sock: int, argv: list[str]) -> list[str]:
    import _socket  # not socket: its import (enum, selectors) costs 10 ms of every start

    s = _socket.socket(fileno=sock)
    s.send(b"r")
    _, anc, _, _ = s.recvmsg(1, _socket.CMSG_SPACE(4))
    s.close()
    fds = [
        int.from_bytes(data[:4], sys.byteorder)
        for level, kind, data in anc
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS
    ]
    if not fds:
        raise OSError(0, "no FUSE descriptor was handed over")
    os.set_inheritable(fds[0], True)
    return [a.replace("{fd}", str(fds[0])) for a in argv]


def main() -> int:
    spec = json.loads(sys.argv[1])
    argv = spec["argv"]
    try:
        for procs in spec.get("cgroups", []):
            _write(procs, str(os.getpid()))
        src = spec.get("source") or {}
        if "overlay" in src or "attach" in spec:
            _private_namespace(spec.get("userns"))
        if "overlay" in src:
            _mount_overlay(spec["target"], src["overlay"])
        if "attach" in spec:
            _attach(spec["attach"]["from"], spec["attach"]["at"])
        if "handoff" in spec:
            argv = _handoff(spec["handoff"], argv)
        for fd in spec.get("close", []):
            os.close(fd)
    except OSError as e:
        sys.stderr.write(f"sandbox setup failed: {e}\n")  # run.SETUP_FAILED: raised there, not an exit status
        return 125
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        sys.stderr.write(f"sandbox: cannot run {argv[0]!r}: {e}\n")
        return 127
    return 127  # unreachable: exec replaced this process


if __name__ == "__main__":
    sys.exit(main())
