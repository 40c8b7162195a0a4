"""Running a command against the merged view, contained: the sandbox primitive for speculative Bash.

The command runs in private mount, PID and network namespaces (:mod:`overlayfs._nsexec`) with the merged
view mounted over the project's own path, so absolute paths and ``cwd`` look real and nothing leaks the
mountpoint; /tmp and /var/tmp are fresh tmpfs, the home directory is read-only, the network is cut
(loopback only), and a timeout kills the whole PID namespace. With the kernel backend the overlay is
mounted inside the namespace (nothing on the host); with FUSE the server's mount is bind-mounted there.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import NamedTuple

from overlayfs import kernel
from overlayfs.mount import Mount, MountError, choose_backend, open_mount

_TIMEOUT_EXIT = 124
_CANCEL_POLL_S = 0.05


class SandboxResult(NamedTuple):
    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool


def run_in_overlay(ov: kernel.Layers, argv: list[str], *, timeout: float, cwd: str | os.PathLike[str] | None
                   = None, network: bool = False, isolate: bool = True, backend: str = "auto",
                   mount: Mount | None = None, env: dict[str, str] | None = None,
                   stdin: bytes | None = None, cancel: threading.Event | None = None) -> SandboxResult:
    """Run ``argv`` with the merged view of ``ov`` at ``ov.lower``'s own path; blocks until done.

    ``cwd`` defaults to the project root and must lie inside it. ``backend`` is "auto", "kernel", "fuse"
    or "fuse-overlayfs"; pass a live ``mount`` (from :func:`overlayfs.mount.open_mount`) to reuse it.
    The chosen backend is recorded as ``ov.last_backend``. Raises MountError where nothing can mount.
    """
    if not argv:
        raise ValueError("argv is empty: nothing to run")
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout!r}")
    target = os.fspath(Path(ov.lower).absolute())
    workdir = os.fspath(Path(cwd).absolute()) if cwd is not None else target
    if workdir != target and not workdir.startswith(target.rstrip("/") + "/"):
        raise ValueError(f"cwd {workdir!r} is outside the project {target!r}")
    chosen = mount.backend if mount is not None else choose_backend(backend)
    if chosen == "pure":
        raise MountError("no mountable backend here: speculative Bash must stay read-only")
    with contextlib.suppress(AttributeError):
        ov.last_backend = chosen  # type: ignore[misc]
    with contextlib.ExitStack() as stack:
        snap = None
        if mount is not None:
            source = {"bind": os.fspath(mount.root)}
        elif chosen == "kernel":
            Path(ov.workdir).mkdir(parents=True, exist_ok=True)
            source = kernel.overlay_source(ov)
            snap = kernel.snapshot(Path(ov.lower))
        else:
            m = open_mount(ov, chosen)
            stack.callback(m.close)
            source = {"bind": os.fspath(m.root)}
        spec = {"target": target, "source": source, "argv": list(argv), "cwd": workdir,
                "network": network, "isolate": isolate}
        result = _run(kernel.nsexec_argv(spec), timeout=timeout, env=env, stdin=stdin, cancel=cancel)
        if snap is not None:
            kernel.record_session(ov, snap)
        return result


def run_sandboxed(ov: kernel.Layers, command: str, *, timeout: float, backend: str = "auto",
                  cwd: str | os.PathLike[str] | None = None,
                  cancel: threading.Event | None = None) -> SandboxResult:
    """Run a shell command line as speculative Bash would: ``bash -c command`` inside the sandbox.

    Returns (stdout, stderr, exit_code, timed_out); a command killed by the timeout has exit code 124.
    Setting ``cancel`` (from another thread) kills the sandbox within about 50 ms.
    """
    shell = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
    return run_in_overlay(ov, [shell, "-c", command], timeout=timeout, backend=backend, cwd=cwd, cancel=cancel)


def _run(argv: list[str], *, timeout: float, env: dict[str, str] | None,
         stdin: bytes | None, cancel: threading.Event | None = None) -> SandboxResult:
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
    deadline = time.monotonic() + timeout
    timed_out = False
    while True:
        # Short waits so that a cancel from another thread (an aborted speculation) is seen quickly;
        # communicate() may be called again after TimeoutExpired without losing output.
        step = max(0.0, min(_CANCEL_POLL_S, deadline - time.monotonic()))
        try:
            out, err = proc.communicate(stdin, timeout=step)
            break
        except subprocess.TimeoutExpired:
            cancelled = cancel is not None and cancel.is_set()
            if cancelled or time.monotonic() >= deadline:
                # Killing the session kills PID 1 of the sandbox's PID namespace, and with it everything.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                out, err = proc.communicate()
                timed_out = not cancelled
                break
    code = _TIMEOUT_EXIT if timed_out else proc.returncode
    return SandboxResult(out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), code, timed_out)
