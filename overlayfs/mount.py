"""Mounting an overlay's layers as a real directory: backend discovery, choice, mount and reliable unmount.

Backends: ``kernel`` (kernel overlayfs; a host mount needs root, otherwise only :mod:`overlayfs.sandbox`
can use it, inside a private namespace), ``fuse`` (our FUSE server, :mod:`overlayfs.fuse`) and
``fuse-overlayfs`` (the C reference; on a bounded layer started in a private mount namespace, see
:mod:`overlayfs.fuse_overlayfs`). ``pure`` is the in-process view: it cannot be mounted, so Bash must
stay read-only with it. ``auto`` picks kernel, then fuse, and records the choice in ``ov.last_backend``.

Every mountpoint is a fresh directory named ``speculate-mnt-<owner pid>-*``: a mount whose owner has died
is unmounted (lazily) the next time any process mounts, and the FUSE server unmounts itself when its owner
dies, so a crash leaves no stale mount.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from overlayfs import kernel, layer
from overlayfs.errors import OverlayError

log = logging.getLogger("overlayfs.mount")

BACKENDS = ("pure", "fuse", "kernel", "fuse-overlayfs")
MOUNTABLE = ("kernel", "fuse", "fuse-overlayfs")
MNT_PREFIX = "speculate-mnt-"
_MNT_RE = re.compile(rf"/{MNT_PREFIX}(\d+)-[^/]*$")
_PKG_PARENT = os.fspath(Path(__file__).resolve().parents[1])
READ_AHEAD_KB = 1024  # 1 MiB reads on the FUSE mount: 200 MB sequential read 110 -> 60 ms


class MountError(OverlayError, OSError):
    """A backend is unavailable here, or mounting failed; the message says which and why."""


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
            clean = _unmount(self.root, self.backend)
        finally:
            if self._proc is not None:
                if clean:
                    # Unmounted with nothing open: every request was answered and its records written
                    # (they are appended synchronously), so the server has nothing left to do. Its own
                    # shutdown takes 60-110 ms, which an aborted speculation would wait for.
                    with contextlib.suppress(ProcessLookupError):
                        self._proc.kill()
                _reap(self._proc)
            if _is_mounted(self.root):  # server died or refused: never leave the mount behind
                _lazy_unmount(self.root)
            with contextlib.suppress(OSError):
                self.root.rmdir()
            if self.backend == "fuse-overlayfs":
                layer.adopt_fuse_overlayfs(os.fspath(self.layers.upper))
            if self._snapshot is not None:
                kernel.record_session(self.layers, self._snapshot)
            forget = getattr(self.layers, "upper_changed", None)
            if forget is not None:  # the pure view's cached lookups of what was written through the mount
                forget()


# -- discovery -------------------------------------------------------------------------------------
def _fuse_problem() -> str | None:
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return f"/dev/fuse is not readable and writable by uid {os.geteuid()}"
    if os.geteuid() != 0 and shutil.which("fusermount3") is None:
        return "fusermount3 is not installed"
    return None


def unavailable_reason(backend: str) -> str | None:
    """None if ``backend`` works on this machine, else a sentence saying why not."""
    if backend == "pure":
        return None
    if backend == "fuse":
        return _fuse_problem()
    if backend == "fuse-overlayfs":
        if shutil.which("fuse-overlayfs") is None:
            return "fuse-overlayfs is not installed"
        return _fuse_problem()
    if backend == "kernel":
        return kernel.kernel_available()
    raise ValueError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)} or 'auto'")


def available_backends() -> list[str]:
    """The backends that work on this machine, in ``BACKENDS`` order, e.g. ["pure", "fuse", "kernel"]."""
    return [b for b in BACKENDS if unavailable_reason(b) is None]


def choose_backend(backend: str = "auto", *, need_host_mount: bool = False) -> str:
    """Resolve ``auto`` to kernel, then fuse, then pure; check an explicit choice. Raises MountError."""
    if backend != "auto":
        why = unavailable_reason(backend)
        if why is not None:
            raise MountError(f"backend {backend!r} is unavailable: {why}")
        return backend
    for b in ("kernel", "fuse"):
        if b == "kernel" and need_host_mount and os.geteuid() != 0:
            continue
        if unavailable_reason(b) is None:
            return b
    return "pure"


# -- mounting --------------------------------------------------------------------------------------
def open_mount(ov: kernel.Layers, backend: str = "auto", *, snapshot: bool = True) -> Mount:
    """Mount ``ov``'s layers at a fresh directory and return the live :class:`Mount` (close it!).

    On kernel overlayfs and fuse-overlayfs, which cannot record bases themselves, the mount snapshots the
    lower tree and records the bases of what changed as it closes; ``snapshot=False`` leaves that to the
    caller (:mod:`overlayfs.sandbox.session`)."""
    chosen = choose_backend(backend, need_host_mount=True)
    if chosen == "pure":
        raise MountError("no mountable backend here (kernel: "
                         f"{unavailable_reason('kernel')}; fuse: {unavailable_reason('fuse')}); "
                         "use the pure view and keep Bash read-only")
    for name in ("lower", "upper", "metadir"):
        if not Path(getattr(ov, name)).is_dir():
            raise MountError(f"overlay {name} {os.fspath(getattr(ov, name))!r} is not a directory")
    cleanup_stale()
    root = Path(tempfile.mkdtemp(prefix=f"{MNT_PREFIX}{os.getpid()}-"))
    try:
        m = _mount(ov, chosen, root, snapshot)
    except BaseException:
        if _is_mounted(root):
            _lazy_unmount(root)
        with contextlib.suppress(OSError):
            root.rmdir()
        raise
    with contextlib.suppress(AttributeError):
        ov.last_backend = chosen  # type: ignore[misc]
    log.info("mounted %s at %s with backend %s", ov.lower, root, chosen)
    return m


@contextlib.contextmanager
def mounted(ov: kernel.Layers, backend: str = "auto") -> Iterator[Path]:
    """Context manager yielding the merged view's root directory; unmounts on exit, whatever happened.

    The chosen backend is recorded as ``ov.last_backend``. With the kernel backend and no root, the mount
    would only be visible inside a namespace: use :func:`overlayfs.sandbox.run_in_overlay` instead.
    """
    m = open_mount(ov, backend)
    try:
        yield m.root
    finally:
        m.close()


def _mount(ov: kernel.Layers, backend: str, root: Path, snapshot: bool = True) -> Mount:
    if backend == "kernel":
        if os.geteuid() != 0:
            raise MountError("kernel overlayfs is only mountable inside a private namespace without root: "
                             "use overlayfs.sandbox.run_in_overlay(ov, argv, ...)")
        snap = kernel.snapshot(Path(ov.lower)) if snapshot else None
        kernel.mount_host(ov, root, owner=os.getpid())
        return Mount(root, backend, ov, _snapshot=snap)
    if backend == "fuse-overlayfs":
        work = Path(ov.workdir) / "fuse-overlayfs"
        work.mkdir(parents=True, exist_ok=True)
        snap = kernel.snapshot(Path(ov.lower)) if snapshot else None
        if getattr(ov, "layer", None) is not None:
            from overlayfs.fuse_overlayfs import start_on_layer

            return Mount(root, backend, ov, _proc=start_on_layer(ov, root), _snapshot=snap)
        opts = f"lowerdir={ov.lower},upperdir={ov.upper},workdir={work}"
        r = subprocess.run(["fuse-overlayfs", "-o", opts, os.fspath(root)], capture_output=True, timeout=30)
        if r.returncode != 0:
            raise MountError(f"fuse-overlayfs failed: {r.stderr.decode(errors='replace').strip()}")
        return Mount(root, backend, ov, _snapshot=snap)
    return _start_fuse(ov, root)


def _start_fuse(ov: kernel.Layers, root: Path, *, ready_timeout: float = 30.0) -> Mount:
    env = dict(os.environ)
    env["PYTHONPATH"] = _PKG_PARENT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    logf = open(Path(ov.metadir) / "fuse-server.log", "ab")
    control, theirs = socket.socketpair()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "overlayfs.fuse", os.fspath(ov.lower), os.fspath(ov.upper),
             os.fspath(ov.metadir), os.fspath(root), "--owner-pid", str(os.getpid()),
             "--workdir", os.fspath(ov.workdir), "--control-fd", str(theirs.fileno())],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=logf, env=env, cwd="/",
            start_new_session=True, pass_fds=(theirs.fileno(),))  # a ^C must not kill the server under a mount
    except BaseException:
        control.close()
        raise
    finally:
        logf.close()
        theirs.close()
    assert proc.stdout is not None
    deadline = time.monotonic() + ready_timeout
    line = b""
    while time.monotonic() < deadline:
        r, _, _ = select.select([proc.stdout], [], [], 0.2)
        if r:
            line = proc.stdout.readline()
            break
        if proc.poll() is not None:
            break
    proc.stdout.close()
    if line.strip() != b"ready":
        control.close()
        _reap(proc)
        tail = (Path(ov.metadir) / "fuse-server.log").read_bytes()[-2000:].decode(errors="replace")
        raise MountError(f"FUSE server did not come up at {root}: {tail.strip() or 'no output'}")
    _set_read_ahead(root)
    return Mount(root, "fuse", ov, _proc=proc, _control=control)


def _set_read_ahead(root: Path) -> None:
    dev = os.stat(root).st_dev
    with contextlib.suppress(OSError):
        Path(f"/sys/class/bdi/{os.major(dev)}:{os.minor(dev)}/read_ahead_kb").write_text(f"{READ_AHEAD_KB}\n")


# -- unmounting ------------------------------------------------------------------------------------
def _mountpoints() -> dict[str, str]:
    """Mountpoint -> filesystem type, for this process's mount namespace."""
    out: dict[str, str] = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            mp = left.split()[4].replace("\\040", " ")
            out[mp] = right.split()[0]
    return out


def _is_mounted(root: Path) -> bool:
    return os.fspath(root) in _mountpoints()


_MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)


def _unmount(root: Path, backend: str) -> bool:
    """Unmount ``root``; True if it was a clean (not lazy) unmount, or nothing was mounted."""
    if not _is_mounted(root):
        return True
    if os.geteuid() == 0:  # umount(2) itself: fusermount3 -u and umount(8) are a fork and exec more
        if _libc.umount2(os.fsencode(root), 0) == 0:
            return True
        log.warning("unmount of %s failed (%s); unmounting lazily", root, os.strerror(ctypes.get_errno()))
        _lazy_unmount(root)
        return False
    cmd = ["fusermount3", "-u", os.fspath(root)] if backend != "kernel" else ["umount", os.fspath(root)]
    r = subprocess.run(cmd, capture_output=True, timeout=30)
    if r.returncode != 0:  # busy (a process still has a cwd or fd inside): detach it lazily
        log.warning("unmount of %s failed (%s); unmounting lazily", root, r.stderr.decode(errors="replace"))
        _lazy_unmount(root)
        return False
    return True


def _lazy_unmount(root: Path) -> None:
    if os.geteuid() == 0 and _libc.umount2(os.fsencode(root), _MNT_DETACH) == 0:
        return
    for cmd in (["fusermount3", "-u", "-z"], ["umount", "-l"]):
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            if subprocess.run([*cmd, os.fspath(root)], capture_output=True, timeout=30).returncode == 0:
                return


def _reap(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def cleanup_stale() -> list[str]:
    """Lazily unmount (and remove) our mountpoints whose owner process is gone; returns what it cleaned."""
    cleaned = []
    for mp in _mountpoints():
        m = _MNT_RE.search(mp)
        if m is None or os.path.exists(f"/proc/{m.group(1)}"):
            continue
        _lazy_unmount(Path(mp))
        with contextlib.suppress(OSError):
            os.rmdir(mp)
        cleaned.append(mp)
    # Mountpoints of dead owners whose mount is already gone (the FUSE server unmounted itself).
    for d in Path(tempfile.gettempdir()).glob(f"{MNT_PREFIX}*"):
        m = _MNT_RE.search(f"/{d.name}")
        if m is not None and not os.path.exists(f"/proc/{m.group(1)}") and os.fspath(d) not in cleaned:
            with contextlib.suppress(OSError):
                d.rmdir()
                cleaned.append(os.fspath(d))
    return cleaned
