"""Root on another user's project: run bubblewrap in a user namespace that maps every host uid and gid to
itself, so that the capabilities bwrap leaves the command (``CAP_DAC_OVERRIDE``, ``CAP_DAC_READ_SEARCH``,
``CAP_FOWNER``, ``CAP_CHOWN``; :data:`overlayfs.sandbox.policy.ROOT_FILE_CAPS`) reach the files of every
owner, as root's do live (docs/security.md, "Root on another user's project").

The compiled stage one does this itself (``stage.c``'s ``-m``); this program is its Python counterpart,
for the Python stages. Standalone (stdlib only, run as ``python -I -S _userns.py ARGV...`` by stage one,
after it has mounted the view and attached the scratch space): a child unshares a user namespace, this process (root in the
parent namespace, which alone may write a mapping of more than its own uid) writes the child's
``uid_map`` and ``gid_map`` (``0 0 4294967295``), the child sets ``user.max_user_namespaces`` to 0 in its
namespace (nothing in the sandbox can make another, as bwrap's ``--disable-userns`` would) and execs
ARGV (bwrap, without ``--unshare-user``). This process waits and exits with the child's status; a kill of
the process group ends both (bwrap has ``--die-with-parent``).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

CLONE_NEWUSER = 0x10000000
SETUP_FAILED = 125  # run.SETUP_FAILED's status: "sandbox setup failed: ..." on stderr, raised there
ALL = "0 0 4294967295\n"  # every id the kernel has, each to itself


def _fail(what: str) -> int:
    sys.stderr.write(f"sandbox setup failed: {what}\n")
    return SETUP_FAILED


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def main() -> int:
    argv = sys.argv[1:]
    if not argv:
        return _fail("_userns.py: nothing to run")
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the namespace, then bwrap
        os.close(ready_r)
        os.close(go_w)
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(CLONE_NEWUSER) != 0:
            os.write(2, f"sandbox setup failed: unshare: {os.strerror(ctypes.get_errno())}\n".encode())
            os._exit(SETUP_FAILED)
        os.write(ready_w, b"r")
        os.close(ready_w)
        if os.read(go_r, 1) != b"g":
            os._exit(SETUP_FAILED)  # the parent said why
        os.close(go_r)
        try:
            _write("/proc/sys/user/max_user_namespaces", "0\n")
            os.execvp(argv[0], argv)
        except OSError as e:
            os.write(2, f"sandbox setup failed: {e}\n".encode())
            os._exit(SETUP_FAILED)
    os.close(ready_w)
    os.close(go_r)
    try:
        if os.read(ready_r, 1) != b"r":
            raise OSError(0, "the child did not make its user namespace")
        _write(f"/proc/{pid}/uid_map", ALL)
        _write(f"/proc/{pid}/setgroups", "allow\n")
        _write(f"/proc/{pid}/gid_map", ALL)
        os.write(go_w, b"g")
    except OSError as e:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return _fail(f"mapping the user namespace: {e}")
    finally:
        os.close(go_w)
        os.close(ready_r)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # passed on, as if the child had them
        signal.signal(sig, lambda s, _f: os.kill(pid, s))
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


if __name__ == "__main__":
    sys.exit(main())
