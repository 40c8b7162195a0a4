"""Stage one of a sandboxed command: join its cgroups, mount the kernel overlay privately, exec the rest.

Standalone (stdlib only, run as ``python -I -S _nsexec.py SPEC_JSON``) so that starting it costs one bare
interpreter. SPEC keys: ``cgroups`` (``cgroup.procs`` files to join first, so that every process of the
sandbox is counted), ``target`` and ``source`` (``{"overlay": {lowerdir, upperdir, workdir}}``: mount the
kernel overlay at ``target`` in a new mount namespace, with a user namespace too when not root;
``{"bind": path}`` or absent: mount nothing) and ``argv`` (exec'd last: bubblewrap, which builds the
sandbox proper on top of this namespace, or a probe command).
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_REC, MS_PRIVATE = 16384, 1 << 18
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


def _mount_overlay(target: str, o: dict[str, str]) -> None:
    euid, egid = os.geteuid(), os.getegid()
    _check(_libc.unshare(CLONE_NEWNS | (CLONE_NEWUSER if euid != 0 else 0)), "unshare")
    if euid != 0:  # root of a namespace of our own, only to mount: bwrap drops it again
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"0 {euid} 1")
        _write("/proc/self/gid_map", f"0 {egid} 1")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing mounted here propagates to the host
    opts = f"lowerdir={o['lowerdir']},upperdir={o['upperdir']},workdir={o['workdir']}"
    if euid != 0:
        opts += ",userxattr"
    _mount("speculate-overlay", target, "overlay", 0, opts)


def main() -> int:
    spec = json.loads(sys.argv[1])
    try:
        for procs in spec.get("cgroups", []):
            _write(procs, str(os.getpid()))
        src = spec.get("source") or {}
        if "overlay" in src:
            _mount_overlay(spec["target"], src["overlay"])
    except OSError as e:
        sys.stderr.write(f"sandbox setup failed: {e}\n")  # run.SETUP_FAILED: raised there, not an exit status
        return 125
    argv = spec["argv"]
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        sys.stderr.write(f"sandbox: cannot run {argv[0]!r}: {e}\n")
        return 127
    return 127  # unreachable: exec replaced this process


if __name__ == "__main__":
    sys.exit(main())
