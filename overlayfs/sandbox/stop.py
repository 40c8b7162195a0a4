"""Running the sandbox's first process and stopping it: on timeout, on :meth:`CancelToken.cancel` (any
thread), and, when a kill is not enough, by aborting the view under it.

A kill of the process group ends bwrap's PID 1 and with it the sandbox's PID namespace. A process asleep in
a FUSE request that the view's server does not answer (a layer file the server blocks on, a wedged lower
filesystem) cannot die, though, and holds the command's pipes open: if the command has not ended
:data:`ABORT_AFTER` after its kill, ``abort`` (:meth:`overlayfs.sandbox.session.ViewSession.abort`) aborts
the view's FUSE connection and ends its server (:func:`abort_mount`), every waiting request fails, and the
kill returns. :func:`backend_failure` says whether a view still serves after a command.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from overlayfs.mount import Mount

TIMEOUT_EXIT = 124

# After a kill, how long the sandbox may take to go before the view under it is aborted: a process asleep in
# a FUSE request that its server does not answer cannot die, and holds the command's pipes open.
ABORT_AFTER = 0.05


class _Stopper:
    """Stops one command: :meth:`kill` kills its sandbox at once and, if the command has not ended
    :data:`ABORT_AFTER` seconds later, calls ``abort`` (which aborts the view's FUSE connection)."""

    def __init__(self, proc: subprocess.Popen[bytes], abort: Callable[[], None] | None) -> None:
        self.proc, self.abort = proc, abort
        self._lock = threading.Lock()
        self._ended = False
        self._timer: threading.Timer | None = None

    def kill(self) -> None:
        _kill(self.proc)
        with self._lock:
            if self.abort is None or self._ended or self._timer is not None:
                return
            self._timer = threading.Timer(ABORT_AFTER, self._unwedge)
            self._timer.daemon = True
            self._timer.start()

    def _unwedge(self) -> None:
        with self._lock:
            if self._ended:
                return
        assert self.abort is not None
        self.abort()

    def ended(self) -> None:
        with self._lock:
            self._ended = True
            timer = self._timer
        if timer is not None:
            timer.cancel()


class CancelToken:
    """Thread-safe: :meth:`cancel` kills the running sandbox at once (no polling), or the next one; a
    command that still has not ended :data:`ABORT_AFTER` later has the view under it aborted."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stopper: _Stopper | None = None
        self.cancelled = False

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            if self._stopper is not None:
                self._stopper.kill()

    def _attach(self, stopper: _Stopper | None) -> bool:
        with self._lock:
            self._stopper = stopper
            if stopper is not None and self.cancelled:
                stopper.kill()
            return self.cancelled


def _kill(proc: subprocess.Popen[bytes]) -> None:
    # The process group is bwrap's; bwrap's PID 1 dies with it (--die-with-parent), and with PID 1 the
    # whole PID namespace.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def run_process(
    argv: list[str],
    *,
    timeout: float,
    env: dict[str, str] | None,
    stdin: bytes | None,
    token: CancelToken,
    pass_fds: tuple[int, ...],
    abort: Callable[[], None] | None = None,
) -> tuple[str, str, int, bool]:
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
        pass_fds=pass_fds,
    )
    stopper = _Stopper(proc, abort)
    token._attach(stopper)
    timed_out = False
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        stopper.kill()
        out, err = proc.communicate()
        timed_out = True
    finally:
        stopper.ended()
        token._attach(None)
    code = TIMEOUT_EXIT if timed_out else proc.returncode
    if code < 0:
        code = 128 - code  # killed by a signal, as a shell reports it
    return out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), code, timed_out


def abort_mount(m: Mount) -> None:
    """Abort ``m``'s FUSE connection (through fusectl where it is mounted) and kill its server (whose
    ``/dev/fuse`` descriptor closing aborts the connection too). Nothing here touches the mount itself: a
    stat of it could wait on the very server that does not answer."""
    conn = _fuse_connection(m.root)
    if conn is not None:
        with contextlib.suppress(OSError):
            Path(f"{FUSECTL}/{conn}/abort").write_text("1")
    if m._proc is not None:
        with contextlib.suppress(ProcessLookupError):
            m._proc.kill()


FUSECTL = "/sys/fs/fuse/connections"


def _fuse_connection(root: Path) -> int | None:
    """The fusectl connection number of the FUSE mount at ``root`` (its device's minor), from mountinfo."""
    want = os.fspath(root)
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields = left.split()
            if fields[4].replace("\\040", " ") == want and right.startswith("fuse"):
                return int(fields[2].split(":")[1])
    return None


def backend_failure(m: Mount) -> str | None:
    """Why the mount under the command is no longer serving, or None if it is."""
    proc = m._proc
    if proc is not None and proc.poll() is not None:
        return f"the FUSE server exited with status {proc.returncode}"
    try:
        os.stat(m.root)
    except OSError as e:
        return f"the mount at {m.root} does not answer: {e.strerror}"
    return None
