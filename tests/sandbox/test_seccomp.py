"""The seccomp filter on its own: every rule on an integer argument holds when the caller sets the high bits
the kernel ignores (issue #22, E1). The filter is loaded into a child process exactly as bwrap loads it, and
each filtered call is made with raw ``syscall()``; the same calls made without the filter show that each
one would have gone through."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from overlayfs.sandbox.seccomp import NAMESPACE_FLAGS, TIOCLINUX, TIOCSTI, SeccompUnavailable, filter_bpf

HIGH = 0x5A5A5A5A00000000  # bits 32-63: not part of an int argument, so the kernel never sees them
SIGCHLD = 17

# Runs in a child: loads the filter from argv[1] (or none when it is "-"), makes each call of argv[2] (JSON
# [name, syscall, args]) and prints {name: errno or 0}. A clone that succeeds exits at once in the child.
PROBE = r"""
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]

class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

if sys.argv[1] != "-":
    bpf = open(sys.argv[1], "rb").read()
    buf = ctypes.create_string_buffer(bpf, len(bpf))
    prog = Fprog(len(bpf) // 8, ctypes.cast(buf, ctypes.c_void_p))
    assert libc.prctl(38, 1, None, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS, as bwrap sets it
    assert libc.prctl(22, 2, ctypes.addressof(prog), 0, 0) == 0, ctypes.get_errno()  # SECCOMP_MODE_FILTER
out = {}
sv = (ctypes.c_int * 2)()
for name, nr, args in json.loads(sys.argv[2]):
    args = [ctypes.byref(sv) if a == "SV" else ctypes.c_char_p(a[5:].encode()) if str(a).startswith("PATH:")
            else ctypes.c_ulong(a) for a in args]
    r = libc.syscall(nr, *args)
    e = ctypes.get_errno() if r < 0 else 0
    if name.startswith("clone") and r == 0:
        os._exit(0)  # the child of a clone that went through
    if name.startswith("clone") and r > 0:
        os.waitpid(r, 0)
    out[name] = e
print(json.dumps(out))
"""


def _nr(name: str) -> int:
    import pyseccomp

    return int(pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name))


def _calls(tmp: Path) -> list[tuple[str, int, list[object], int]]:
    """(name, syscall, args, the errno the filter answers with)."""
    import socket

    calls: list[tuple[str, int, list[object], int]] = [
        ("socket-unix", _nr("socket"), [HIGH | socket.AF_UNIX, socket.SOCK_STREAM, 0], errno.EACCES),
        (
            "socket-unix-dgram",
            _nr("socket"),
            [HIGH | socket.AF_UNIX, HIGH | socket.SOCK_DGRAM, 0],
            errno.EACCES,
        ),
        ("socket-vsock", _nr("socket"), [HIGH | 40, socket.SOCK_STREAM, 0], errno.EACCES),  # AF_VSOCK
        (
            "socketpair-dgram",
            _nr("socketpair"),
            [HIGH | socket.AF_UNIX, HIGH | socket.SOCK_DGRAM, 0, "SV"],
            errno.EACCES,
        ),
        (
            "socketpair-dgram-cloexec",
            _nr("socketpair"),
            [socket.AF_UNIX, HIGH | socket.SOCK_DGRAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK, 0, "SV"],
            errno.EACCES,
        ),
        ("ioctl-tiocsti", _nr("ioctl"), [0, HIGH | TIOCSTI, 0], errno.EPERM),  # stdin: /dev/null
        ("ioctl-tioclinux", _nr("ioctl"), [0, HIGH | TIOCLINUX, 0], errno.EPERM),
        (
            "mknodat-char",
            _nr("mknodat"),
            [HIGH | (1 << 32) - 100, f"PATH:{tmp / 'c'}", HIGH | 0o020600, 0],
            errno.EPERM,
        ),  # AT_FDCWD with high bits; a whiteout (char 0:0) needs no capability
        ("mknod-char", _nr("mknod"), [f"PATH:{tmp / 'd'}", HIGH | 0o020600, 0], errno.EPERM),
    ]
    calls += [
        (f"clone-{flag:#x}", _nr("clone"), [HIGH | flag | SIGCHLD, 0, 0, 0, 0], errno.EPERM)
        for flag in NAMESPACE_FLAGS
        if flag != 0x80
    ]  # 0x80 (NEWTIME) is part of clone's exit signal
    return calls


def _probe(bpf: Path | None, calls: list[tuple[str, int, list[object], int]]) -> dict[str, int]:
    spec = json.dumps([[name, nr, args] for name, nr, args, _ in calls])
    r = subprocess.run(
        [sys.executable, "-c", PROBE, os.fspath(bpf) if bpf else "-", spec],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_every_integer_rule_holds_with_the_high_bits_set(tmp_path: Path) -> None:
    try:
        bpf = filter_bpf()
    except SeccompUnavailable as e:
        pytest.skip(str(e))
    (tmp_path / "filter.bpf").write_bytes(bpf)
    calls = _calls(tmp_path)
    got = _probe(tmp_path / "filter.bpf", calls)
    assert got == {name: want for name, _, _, want in calls}


@pytest.mark.privileged
def test_without_the_filter_each_of_those_calls_goes_through(tmp_path: Path) -> None:
    """The control: the kernel really reads only the low 32 bits, so the refusals above are the filter's."""
    if os.geteuid() != 0:
        pytest.skip("needs root: making namespaces and device nodes is what the control does")
    calls = _calls(tmp_path)
    got = _probe(None, calls)
    assert got["ioctl-tiocsti"] == got["ioctl-tioclinux"] == errno.ENOTTY  # reached the tty layer
    if not Path("/dev/vsock").exists():
        got.pop("socket-vsock")  # no vsock transport here: the kernel itself has no such family
    rest = {name: e for name, e in got.items() if not name.startswith("ioctl")}
    assert rest == dict.fromkeys(rest, 0)
