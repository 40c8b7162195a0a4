"""Escape attempts on the host's IPC and network (unix sockets by path and abstract name, SysV memory,
loopback listeners, routes), and issue #22's: host sockets of every type reached by any way of making a
unix socket (E1, E2), and secrets under innocent names (E3), with their bait (:class:`HostSockets`,
:func:`innocent_secrets`)."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import socket
from pathlib import Path
from typing import TYPE_CHECKING

from tests.sandbox.escapes.attempt import OK, Attempt, py, py_args

if TYPE_CHECKING:
    from tests.sandbox.escapes.bait import Bait

# -- IPC ------------------------------------------------------------------------------------------------
IPC: list[Attempt] = [
    Attempt(
        "host-unix-socket",
        "ipc",
        py(f"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{{sock}}'); print('{OK}')"),
        refused=True,
    ),
    Attempt(
        "abstract-socket",
        "ipc",
        py(
            "import socket; s = socket.socket(socket.AF_UNIX); "
            f"s.connect('\\0speculate-escape-{{tag}}'); print('{OK}')"
        ),
        refused=True,
    ),
    Attempt("sysv-shm", "ipc", f"ipcrm -m {{shmid}} && echo {OK}", refused=True),
]

# -- the network ------------------------------------------------------------------------------------
NETWORK: list[Attempt] = [
    Attempt(
        "loopback-host",
        "network",
        py(f"import socket; socket.create_connection(('127.0.0.1', {{port}}), timeout=2); print('{OK}')"),
        refused=True,
    ),
    Attempt(
        "loopback6-host",
        "network",
        py(f"import socket; socket.create_connection(('::1', {{port6}}), timeout=2); print('{OK}')"),
        refused=True,
    ),
    Attempt(
        "outside-route",
        "network",  # no packet is sent anywhere: the sandbox has no route to send one
        "awk 'NR>1{{print \"route\", $1}}' /proc/net/route; awk '{{print \"route\", $10}}' "
        "/proc/net/ipv6_route; awk 'NR>2{{print \"dev\", $1}}' /proc/net/dev",
    ),
]


# == issue #22: host sockets of every type (E1, E2) and secrets under innocent names (E3) ==================
# Kept apart from the lists above: the bait is HostSockets (made by Bait, collected after each attempt) and
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

SOCKETS: list[Attempt] = [
    Attempt(
        "unix-socket-high-bits",
        "ipc",
        py_args(_REACH, "{sockets}", "high-bits", "{nr_socket}"),
        refused=True,
    ),  # E1
    Attempt(
        "unix-socket-every-type", "ipc", py_args(_REACH, "{sockets}", "plain", "{nr_socket}"), refused=True
    ),
    Attempt(
        "socketpair-dgram-sendto",
        "ipc",
        py_args(_REACH, "{sockets}", "dgram-pair-sendto", "{nr_socket}"),
        refused=True,
    ),  # E2
    Attempt(
        "socketpair-dgram-connect",
        "ipc",
        py_args(_REACH, "{sockets}", "dgram-pair-connect", "{nr_socket}"),
        refused=True,
    ),  # E2
    Attempt("socketpair-stream-connect", "ipc", py_args(_REACH, "{sockets}", "pair-connect", "{nr_socket}")),
    Attempt("socketpair-stream-sendto", "ipc", py_args(_REACH, "{sockets}", "pair-sendto", "{nr_socket}")),
    Attempt("socket-other-families", "ipc", py_args(_FAMILIES), refused=True),
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
