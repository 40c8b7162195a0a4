"""Last step inside the sandbox, before the command: per-process rlimits and Landlock, then exec.

Standalone (stdlib only, run as ``python -I -S _inner.py SPEC_JSON ARGV...``) so that it costs one bare
interpreter start. SPEC: ``rlimits`` (name without RLIMIT_ -> value), ``landlock`` (the kernel's ABI
version, 0 to skip) and ``writable`` (the only trees where files may be created, written, renamed or
removed: the view, the private tmpfs and /dev). bwrap has already set no_new_privs, which Landlock needs.
Landlock ABI 6 also scopes signals and abstract unix sockets to the sandbox.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import sys

_SYS_CREATE, _SYS_ADD_RULE, _SYS_RESTRICT = 444, 445, 446  # the same on every architecture
_PATH_BENEATH = 1
# LANDLOCK_ACCESS_FS_*: every write-side right, by the ABI that introduced it.
_WRITE_V1 = (
    (1 << 1)
    | (1 << 4)
    | (1 << 5)
    | (1 << 6)
    | (1 << 7)
    | (1 << 8)
    | (1 << 9)
    | (1 << 10)
    | (1 << 11)
    | (1 << 12)
)  # WRITE_FILE REMOVE_DIR REMOVE_FILE MAKE_CHAR/DIR/REG/SOCK/FIFO/BLOCK/SYM
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1, 2


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _landlock(abi: int, writable: list[str]) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    access = (
        _WRITE_V1
        | (_REFER if abi >= 2 else 0)
        | (_TRUNCATE if abi >= 3 else 0)
        | (_IOCTL_DEV if abi >= 5 else 0)
    )
    scoped = (_SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL) if abi >= 6 else 0
    attr = _RulesetAttr(access, 0, scoped)
    size = 8 if abi < 4 else 16 if abi < 6 else 24  # older kernels reject fields they do not know
    fd = libc.syscall(_SYS_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        for path in writable:
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            try:
                rule = _PathBeneath(access, pfd)
                if (
                    libc.syscall(
                        _SYS_ADD_RULE,
                        ctypes.c_int(fd),
                        ctypes.c_int(_PATH_BENEATH),
                        ctypes.byref(rule),
                        ctypes.c_uint32(0),
                    )
                    != 0
                ):
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
            finally:
                os.close(pfd)
        if libc.syscall(_SYS_RESTRICT, ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(fd)


def main() -> int:
    spec = json.loads(sys.argv[1])
    argv = sys.argv[2:]
    try:
        for name, value in spec.get("rlimits", {}).items():
            resource.setrlimit(getattr(resource, f"RLIMIT_{name}"), (value, value))
        if spec.get("landlock", 0) > 0:
            _landlock(int(spec["landlock"]), spec.get("writable", []))
    except OSError as e:  # a sandbox that cannot be completed does not run the command
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
