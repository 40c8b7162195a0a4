"""Every escape attempt, in the order the runner makes them, and the control: those whose unsandboxed
run must be caught."""

from __future__ import annotations

from tests.sandbox.escapes.attempt import Attempt
from tests.sandbox.escapes.exhaustion import EXHAUSTION
from tests.sandbox.escapes.filesystem import LINKS, MOUNTS, WRITES
from tests.sandbox.escapes.processes import DEVICES, NAMESPACES, PROCESSES
from tests.sandbox.escapes.sockets import CONTROL_22, IPC, NETWORK, SOCKETS

ATTEMPTS: list[Attempt] = [
    *WRITES,
    *MOUNTS,
    *NAMESPACES,
    *PROCESSES,
    *IPC,
    *NETWORK,
    *LINKS,
    *DEVICES,
    *EXHAUSTION,
    *SOCKETS,
]

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
