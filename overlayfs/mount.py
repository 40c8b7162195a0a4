"""Mounting an overlay's layers as a real directory: a live :class:`Mount` and its reliable unmount.

The backends (``kernel``, ``fuse``, ``fuse-overlayfs``, and ``pure``, which cannot be mounted), their
availability and the resolution of ``auto`` are :mod:`overlayfs.backends`'; finding and removing our
mountpoints (a crashed owner's included) is :mod:`overlayfs.mountpoints`'. Both are re-exported here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from overlayfs import backends, kernel
from overlayfs.backends import (
    BACKENDS,
    MOUNTABLE,
    READ_AHEAD_KB,
    available_backends,
    choose_backend,
    unavailable_reason,
)
from overlayfs.errors import MountError
from overlayfs.mountpoints import MNT_PREFIX, cleanup_stale, is_mounted, lazy_unmount, reap

log = logging.getLogger("overlayfs.mount")

__all__ = [
    "BACKENDS",
    "MNT_PREFIX",
    "MOUNTABLE",
    "READ_AHEAD_KB",
    "Mount",
    "MountError",
    "available_backends",
    "choose_backend",
    "cleanup_stale",
    "mounted",
    "open_mount",
    "unavailable_reason",
]


@dataclass
class Mount:
    """A live mount of an overlay: ``root`` shows the merged view until :meth:`close`."""

    root: Path
    backend: str
    layers: kernel.Layers
    _proc: subprocess.Popen[bytes] | None = None
    _snapshot: kernel.Snapshot | None = None
    _control: socket.socket | None = None  # our FUSE server's: told of writes made behind the mount's back
    closed: bool = field(default=False)

    def invalidate(self, paths: list[str], *, timeout: float = 10.0) -> None:
        """Tell our FUSE server that the upper layer's entries at ``paths`` (relative) changed behind its
        back: it re-resolves them and drops what the kernel caches of them before it answers. Raises
        OSError (MountError where this mount cannot be told)."""
        if self._control is None or self.closed:
            raise MountError(f"the {self.backend} mount at {self.root} cannot be told of changes")
        import json

        self._control.settimeout(timeout)
        self._control.sendall(json.dumps(paths).encode("utf-8", "surrogateescape") + b"\n")
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = self._control.recv(64)
            if not chunk:
                raise MountError("the FUSE server closed its control channel")
            answer += chunk
        if answer.strip() != b"ok":
            raise MountError(f"the FUSE server answered {answer.strip()!r}")

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._control is not None:
            self._control.close()
        clean = False
        try:
            clean = backends.get(self.backend).unmount(self.root)
        finally:
            if self._proc is not None:
                if clean:
                    # Unmounted with nothing open: every request was answered and its records written
                    # (they are appended synchronously), so the server has nothing left to do. Its own
                    # shutdown takes 60-110 ms, which an aborted speculation would wait for.
                    with contextlib.suppress(ProcessLookupError):
                        self._proc.kill()
                reap(self._proc)
            if is_mounted(self.root):  # server died or refused: never leave the mount behind
                lazy_unmount(self.root)
            with contextlib.suppress(OSError):
                self.root.rmdir()
            backends.get(self.backend).after_close(os.fspath(self.layers.upper))
            if self._snapshot is not None:
                kernel.record_session(self.layers, self._snapshot)
            forget = getattr(self.layers, "upper_changed", None)
            if forget is not None:  # the pure view's cached lookups of what was written through the mount
                forget()


# -- mounting --------------------------------------------------------------------------------------
def open_mount(ov: kernel.Layers, backend: str = "auto", *, snapshot: bool = True) -> Mount:
    """Mount ``ov``'s layers at a fresh directory and return the live :class:`Mount` (close it!).

    On kernel overlayfs and fuse-overlayfs, which cannot record reads or bases themselves, the mount starts
    watching the lower tree (:func:`overlayfs.kernel.snapshot`) and records the bases of what changed, and
    the whole project as read, as it closes; ``snapshot=False`` leaves that to the caller
    (:mod:`overlayfs.sandbox.session`)."""
    chosen = choose_backend(backend, need_host_mount=True)
    if not backends.get(chosen).mountable:
        raise MountError(
            "no mountable backend here (kernel: "
            f"{unavailable_reason('kernel')}; fuse: {unavailable_reason('fuse')}); "
            "use the pure view and keep Bash read-only"
        )
    for name in ("lower", "upper", "metadir"):
        if not Path(getattr(ov, name)).is_dir():
            raise MountError(f"overlay {name} {os.fspath(getattr(ov, name))!r} is not a directory")
    cleanup_stale()
    root = Path(tempfile.mkdtemp(prefix=f"{MNT_PREFIX}{os.getpid()}-"))
    try:
        started = backends.get(chosen).start(ov, root, snapshot=snapshot)
    except BaseException:
        if is_mounted(root):
            lazy_unmount(root)
        with contextlib.suppress(OSError):
            root.rmdir()
        raise
    log.info("mounted %s at %s with backend %s", ov.lower, root, chosen)
    return Mount(root, chosen, ov, _proc=started.proc, _snapshot=started.snapshot, _control=started.control)


@contextlib.contextmanager
def mounted(ov: kernel.Layers, backend: str = "auto") -> Iterator[Path]:
    """Context manager yielding the merged view's root directory; unmounts on exit, whatever happened.

    With the kernel backend and no root, the mount would only be visible inside a namespace: use
    :func:`overlayfs.sandbox.run_in_overlay` instead.
    """
    m = open_mount(ov, backend)
    try:
        yield m.root
    finally:
        m.close()
