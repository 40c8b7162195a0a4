"""Escape attempts against the speculation sandbox, and a runner that checks the host after each one.

Run in-process by the tests (as root) and as a script by an unprivileged user
(``python -m tests.sandbox.escapes --backend kernel``, stdlib and overlayfs only), so the same attempts are
judged for both. The runner sets up host-side bait owned by whoever runs it: a canary process holding a
secret in its environment, unix sockets of every type (by path outside /tmp, /var/tmp and /run, and by
abstract name), TCP listeners on loopback, a SysV shared memory segment, a file in the home directory,
secrets under innocent names in the environment the sandbox is started from. An attempt is contained when every host location it aims
at hashes the same afterwards, the canary is alive and untraced, no bait listener saw a connection, no
secret appears in the output, and, for attempts marked ``refused``, the command did not report success.

The attempts, by area: :mod:`.filesystem` (writes, mounts, links), :mod:`.processes` (namespaces,
processes, devices), :mod:`.sockets` (IPC, network, and issue #22's sockets and secrets with their bait),
:mod:`.exhaustion`; :mod:`.catalogue` puts them in order and names the control. :mod:`.bait` sets up the
host side, :mod:`.runner` runs and judges each attempt, ``__main__`` is the script.
"""

from __future__ import annotations

from tests.sandbox.escapes.attempt import OK, Attempt
from tests.sandbox.escapes.bait import Bait, digest
from tests.sandbox.escapes.catalogue import ATTEMPTS, CONTROL
from tests.sandbox.escapes.runner import Outcome, run_all, run_attempt, workspace, workspace_parent

__all__ = [
    "ATTEMPTS",
    "CONTROL",
    "OK",
    "Attempt",
    "Bait",
    "Outcome",
    "digest",
    "run_all",
    "run_attempt",
    "workspace",
    "workspace_parent",
]
