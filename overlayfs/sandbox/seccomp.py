"""The sandbox's seccomp filter, compiled once with libseccomp (through ``pyseccomp``) into classic BPF.

Default allow, with a deny list of what a build or a test run never needs and an escape needs: changing
the mount table, entering or making namespaces, tracing or reading other processes, kernel keyrings,
BPF, perf, modules, kexec, clocks, io_uring, handle-based opens, device nodes, terminal injection, and
every socket that could reach past the sandbox's network namespace.

Sockets: ``socket()`` is allowed only for AF_INET, AF_INET6 and AF_NETLINK, which the network namespace
confines to the sandbox. AF_UNIX is refused because a host socket on a read-only mount still accepts
connections (and Landlock cannot yet restrict connecting to one), AF_VSOCK because no namespace covers it,
and the rest because nothing needs them. ``socketpair`` is allowed only for SOCK_STREAM and SOCK_SEQPACKET:
such a pair is connected from birth, so ``connect()`` on either end fails with EISCONN and an address given
to ``sendto``/``sendmsg`` is refused (stream) or ignored (seqpacket). A datagram pair is refused: its ends
can be re-connected, or ``sendto`` any named datagram socket. So no unix socket in the sandbox can be aimed
at a path, and seccomp never needs to read a sockaddr (which it cannot: it sees pointers only).

Integer arguments: the kernel reads an ``int`` argument's low 32 bits, so every comparison masks with
0xFFFFFFFF (or a narrower mask): a 64-bit comparison would let ``socket(0x100000001, ...)`` pass as
AF_UNIX. ``clone3`` answers ENOSYS (its flags sit behind a pointer that seccomp cannot read) so libc falls
back to ``clone``, whose namespace flags are checked. A foreign architecture's syscalls (``int 0x80``, x32)
kill the caller: libseccomp's default for a filter that names only the native one.
"""

from __future__ import annotations

import errno
import functools
import os
import socket
import stat
from typing import Any

from overlayfs.errors import OverlayError

DENIED = (
    # the mount table and the root
    "mount",
    "umount",
    "umount2",
    "pivot_root",
    "chroot",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
    # namespaces
    "setns",
    "unshare",
    # other processes
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    # kernel interfaces
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "syslog",
    "quotactl",
    "quotactl_fd",
    "lookup_dcookie",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "open_by_handle_at",
    "name_to_handle_at",
    "fanotify_init",
    "nfsservctl",
    "uselib",
    "iopl",
    "ioperm",
    "vhangup",
    "sethostname",
    "setdomainname",
    # clocks
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
)
NAMESPACE_FLAGS = (
    0x00020000,
    0x02000000,
    0x04000000,
    0x08000000,
    0x10000000,
    0x20000000,
    0x40000000,
    0x00000080,
)  # NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME
TIOCSTI, TIOCLINUX = 0x5412, 0x541C
_S_IFMT = 0o170000
INT = 0xFFFFFFFF  # the bits of an int argument the kernel reads
SOCKET_FAMILIES = (socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK)  # the only ones socket() may make
_FAMILY_LIMIT = 64  # families are numbered below this (AF_MAX is 46 in Linux 6.18); higher ones do not exist
SOCKETPAIR_TYPES = (socket.SOCK_STREAM, socket.SOCK_SEQPACKET)  # connected pairs: never re-aimed
_SOCK_TYPE_MASK = 0xF  # the type's low bits; SOCK_NONBLOCK and SOCK_CLOEXEC sit above them


class SeccompUnavailable(OverlayError, RuntimeError):
    """libseccomp (or its Python binding) is missing: the full sandbox cannot be built here."""


@functools.cache
def filter_bpf() -> bytes:
    """The compiled filter (cached per process). Raises SeccompUnavailable where libseccomp is absent."""
    try:
        import pyseccomp as sc
    except (ImportError, OSError) as e:  # the binding loads libseccomp.so.2 at import
        raise SeccompUnavailable(f"pyseccomp/libseccomp is not usable: {e}") from e
    f = sc.SyscallFilter(defaction=sc.ALLOW)
    deny = sc.ERRNO(errno.EPERM)

    def add(action: int, name: str, *args: object) -> None:
        try:
            f.add_rule(action, name, *args)
        except (OSError, ValueError):
            if _native(sc, name):  # a rule libseccomp cannot build would be a hole, not a missing syscall
                raise
            # else a syscall this architecture does not have (iopl on arm64)

    for name in DENIED:
        add(deny, name)
    for flag in NAMESPACE_FLAGS:  # any namespace flag set in clone's first argument
        add(deny, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    add(sc.ERRNO(errno.ENOSYS), "clone3")
    for kind in (stat.S_IFCHR, stat.S_IFBLK):
        add(deny, "mknod", sc.Arg(1, sc.MASKED_EQ, _S_IFMT, kind))
        add(deny, "mknodat", sc.Arg(2, sc.MASKED_EQ, _S_IFMT, kind))
    for req in (TIOCSTI, TIOCLINUX):
        add(deny, "ioctl", sc.Arg(1, sc.MASKED_EQ, INT, req))
    refuse = sc.ERRNO(errno.EACCES)
    for family in range(_FAMILY_LIMIT):  # an allow-list, as one refusal per other family
        if family not in SOCKET_FAMILIES:
            add(refuse, "socket", sc.Arg(0, sc.MASKED_EQ, INT, family))
    for kind in range(_SOCK_TYPE_MASK + 1):
        if kind not in SOCKETPAIR_TYPES:
            add(refuse, "socketpair", sc.Arg(1, sc.MASKED_EQ, _SOCK_TYPE_MASK, kind))
    fd = os.memfd_create("speculate-seccomp-build", os.MFD_CLOEXEC)
    with os.fdopen(fd, "w+b") as out:
        f.export_bpf(out)
        out.seek(0)
        return out.read()


def _native(sc: Any, name: str) -> bool:
    try:
        return int(sc.resolve_syscall(sc.Arch.NATIVE, name)) >= 0
    except (OSError, ValueError):
        return False


def filter_fd() -> int:
    """A fresh memfd holding the filter, positioned at 0, for ``bwrap --seccomp FD`` (caller closes)."""
    data = filter_bpf()
    fd = os.memfd_create("speculate-seccomp", os.MFD_CLOEXEC)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
