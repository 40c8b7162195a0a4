"""The sandbox's seccomp filter, compiled once with libseccomp (through ``pyseccomp``) into classic BPF.

Default allow, with a deny list of what a build or a test run never needs and an escape needs: changing
the mount table, entering or making namespaces, tracing or reading other processes, kernel keyrings,
BPF, perf, modules, kexec, clocks, io_uring, handle-based opens, device nodes, terminal injection and
AF_UNIX sockets. The last one because a host socket on a read-only mount still accepts connections:
``socketpair`` stays allowed, so pipes between a test runner and its workers keep working. ``clone3``
answers ENOSYS (its flags sit behind a pointer that seccomp cannot read) so libc falls back to ``clone``,
whose namespace flags are checked. A foreign architecture's syscalls (``int 0x80``, x32) kill the caller:
libseccomp's default for a filter that names only the native one.
"""

from __future__ import annotations

import errno
import functools
import os
import socket
import stat

DENIED = (
    # the mount table and the root
    "mount", "umount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick",
    "move_mount", "open_tree", "mount_setattr",
    # namespaces
    "setns", "unshare",
    # other processes
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    # kernel interfaces
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "init_module", "finit_module",
    "delete_module", "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff", "acct", "syslog",
    "quotactl", "quotactl_fd", "lookup_dcookie", "userfaultfd", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "open_by_handle_at", "name_to_handle_at", "fanotify_init", "nfsservctl",
    "uselib", "iopl", "ioperm", "vhangup", "sethostname", "setdomainname",
    # clocks
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
)
NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000,
                   0x00000080)  # NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME
TIOCSTI, TIOCLINUX = 0x5412, 0x541C
_S_IFMT = 0o170000


class SeccompUnavailable(RuntimeError):
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
        except (OSError, ValueError):  # a syscall this architecture does not have (iopl on arm64)
            pass

    for name in DENIED:
        add(deny, name)
    for flag in NAMESPACE_FLAGS:  # any namespace flag set in clone's first argument
        add(deny, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    add(sc.ERRNO(errno.ENOSYS), "clone3")
    for kind in (stat.S_IFCHR, stat.S_IFBLK):
        add(deny, "mknod", sc.Arg(1, sc.MASKED_EQ, _S_IFMT, kind))
        add(deny, "mknodat", sc.Arg(2, sc.MASKED_EQ, _S_IFMT, kind))
    for req in (TIOCSTI, TIOCLINUX):
        add(deny, "ioctl", sc.Arg(1, sc.MASKED_EQ, 0xFFFFFFFF, req))
    add(sc.ERRNO(errno.EACCES), "socket", sc.Arg(0, sc.EQ, socket.AF_UNIX))
    fd = os.memfd_create("speculate-seccomp-build", os.MFD_CLOEXEC)
    with os.fdopen(fd, "w+b") as out:
        f.export_bpf(out)
        out.seek(0)
        return out.read()


def filter_fd() -> int:
    """A fresh memfd holding the filter, positioned at 0, for ``bwrap --seccomp FD`` (caller closes)."""
    data = filter_bpf()
    fd = os.memfd_create("speculate-seccomp", os.MFD_CLOEXEC)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
