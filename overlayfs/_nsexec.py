"""Run a command in private namespaces with the merged view mounted at the project's own path.

Standalone (stdlib only, run as ``python -I -S _nsexec.py SPEC_JSON``) so that starting it costs one bare
interpreter. SPEC keys: ``target`` (where the view appears, normally the project path), ``source``
(``{"overlay": {lowerdir, upperdir, workdir}}`` or ``{"bind": path}``), ``argv``, ``cwd``, ``network``
(bool), ``isolate`` (bool: tmpfs over /tmp and /var/tmp, read-only home). New mount, PID and (unless
``network``) network namespaces; a user namespace too when not root. The command becomes PID 1 of the new
PID namespace, so nothing it starts outlives it.
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import struct
import sys

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
_libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(None if src is None else os.fsencode(src), os.fsencode(target),
                       None if fstype is None else fstype.encode(), ctypes.c_ulong(flags),
                       None if data is None else data.encode()), f"mount {target}")


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _lo_up() -> None:
    # SIOCGIFFLAGS / SIOCSIFFLAGS on "lo": localhost works inside the cut-off network namespace.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        import fcntl

        req = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH14s", fcntl.ioctl(s, 0x8913, req))[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sH14s", b"lo", flags | 1, b""))


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def _private_tmp(tmp: str) -> None:
    """Writes under ``tmp`` go to a fresh tmpfs; what was there stays readable (a venv or a checkout that
    lives in /tmp must keep working), through a kernel overlay with the old ``tmp`` as its lower layer.
    Where that overlay cannot be mounted, the bare tmpfs is kept: writes still go nowhere real."""
    old = os.open(tmp, os.O_PATH | os.O_DIRECTORY)
    try:
        _mount("tmpfs", tmp, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
        upper, work = f"{tmp}/.sandbox-upper", f"{tmp}/.sandbox-work"
        os.mkdir(upper, 0o1777)
        os.chmod(upper, 0o1777)
        os.mkdir(work, 0o700)
        opts = f"lowerdir=/proc/self/fd/{old},upperdir={upper},workdir={work}"
        if os.geteuid() != 0:
            opts += ",userxattr"
        try:
            _mount("speculate-tmp", tmp, "overlay", MS_NOSUID | MS_NODEV, opts)
        except OSError:
            pass
    finally:
        os.close(old)


def _setup(spec: dict) -> None:
    target = spec["target"]
    src = spec["source"]
    if "overlay" in src:
        o = src["overlay"]
        opts = f"lowerdir={o['lowerdir']},upperdir={o['upperdir']},workdir={o['workdir']}"
        if os.geteuid() != 0 or spec.get("userxattr"):
            opts += ",userxattr"
        _mount("speculate-overlay", target, "overlay", 0, opts)
    else:
        _mount(src["bind"], target, None, MS_BIND | MS_REC)
    view = os.open(target, os.O_PATH | os.O_DIRECTORY)  # survives /tmp or home being covered below
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    if spec.get("isolate", True):
        for tmp in ("/tmp", "/var/tmp"):
            if os.path.isdir(tmp):
                _private_tmp(tmp)
        home = os.environ.get("HOME", "")
        if home and home != "/" and os.path.isdir(home):
            _mount(home, home, None, MS_BIND | MS_REC)
            _mount(None, home, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
        if not os.path.isdir(target):
            os.makedirs(target)
        _mount(f"/proc/self/fd/{view}", target, None, MS_BIND | MS_REC)
    os.close(view)
    if not spec.get("network", False):
        try:
            _lo_up()
        except OSError:
            pass


def main() -> int:
    spec = json.loads(sys.argv[1])
    euid, egid = os.geteuid(), os.getegid()
    flags = CLONE_NEWNS | CLONE_NEWPID | (0 if spec.get("network", False) else CLONE_NEWNET)
    if euid != 0:
        flags |= CLONE_NEWUSER
    _check(_libc.unshare(flags), "unshare")
    if euid != 0:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"0 {euid} 1")
        _write("/proc/self/gid_map", f"0 {egid} 1")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing mounted here propagates to the host
    pid = os.fork()
    if pid:
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
    try:
        _setup(spec)
        os.chdir(spec["cwd"])
    except OSError as e:
        sys.stderr.write(f"sandbox setup failed: {e}\n")
        os._exit(125)
    try:
        os.execvp(spec["argv"][0], spec["argv"])
    except OSError as e:
        sys.stderr.write(f"sandbox: cannot run {spec['argv'][0]!r}: {e}\n")
        os._exit(127)


if __name__ == "__main__":
    sys.exit(main())
