"""The overlay backends, one class each behind one small interface, registered by name: whether it works
here (:meth:`MountBackend.unavailable_reason`), how it mounts and unmounts, and what the sandbox session
must do around it because of what it can and cannot do itself (:mod:`overlayfs.sandbox.session`).

``kernel`` (kernel overlayfs; a host mount needs root, otherwise only :mod:`overlayfs.sandbox` can use it,
inside a private namespace), ``fuse`` (our FUSE server, :mod:`overlayfs.fuse`, on the transport it chooses:
its own ``/dev/fuse`` loop, else pyfuse3; ``SPECULATE_FUSE_TRANSPORT`` pins one), ``fuse-pyfuse3`` (the same
server, always on pyfuse3) and ``fuse-overlayfs`` (the C reference; on a bounded layer started in a private
mount namespace, see :mod:`overlayfs.fuse_overlayfs`).
``pure`` is the in-process view: it cannot be mounted, so Bash must stay read-only with it. ``auto`` picks
kernel, then fuse (:func:`choose_backend`, the one place that resolves it).

Callers ask :func:`get` for a backend by name and ask the object; no one else compares backend names.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import select
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import ClassVar, NamedTuple

from overlayfs import kernel, layer, mountpoints
from overlayfs.errors import MountError

_PKG_PARENT = os.fspath(Path(__file__).resolve().parents[1])
log = logging.getLogger("overlayfs.mount")
READ_AHEAD_KB = 1024  # 1 MiB reads on the FUSE mount: 200 MB sequential read 110 -> 60 ms


class Started(NamedTuple):
    """What a backend's mount leaves running: its server process, the lower tree's snapshot (for a backend
    that cannot record bases itself), the control channel of our FUSE server."""

    proc: subprocess.Popen[bytes] | None = None
    snapshot: kernel.Snapshot | None = None
    control: socket.socket | None = None
    transport: str | None = None  # our FUSE server's: "own" or "pyfuse3"


class MountBackend:
    """One way to show an overlay's merged view. Subclasses set the class attributes and override what
    differs; an instance is registered in :data:`REGISTRY` under :attr:`name`."""

    name: ClassVar[str]
    enforces: str  # what the view itself enforces, in words (reported with a sandboxed run)
    mountable: ClassVar[bool] = True  # False: no directory to run a command in (Bash stays read-only)
    host_mount_needs_root: ClassVar[bool] = (
        False  # a mount on the host needs root (else: only in a namespace)
    )
    # It cannot record what a command read or the bases of what it changed: the whole project counts as
    # read, through a watch of the real tree (else a snapshot of it), and the bases are recorded after each
    # command (overlayfs.kernel, overlayfs.treewatch).
    snapshots_lower: ClassVar[bool] = False
    # Mounted by stage one inside each command's private namespace, not kept on the host between commands.
    mounted_per_command: ClassVar[bool] = False
    # Can be told of the pure view's writes behind its back (Mount.invalidate); else such a write makes a
    # kept mount stale.
    told_of_writes: ClassVar[bool] = False

    def unavailable_reason(self) -> str | None:
        """None if this backend works on this machine, else a sentence saying why not."""
        return None

    def start(self, ov: kernel.Layers, root: Path, *, snapshot: bool) -> Started:
        """Mount ``ov``'s layers at the empty directory ``root``. Raises MountError."""
        raise MountError(f"the {self.name} backend cannot be mounted")

    def unmount(self, root: Path) -> bool:
        """Unmount ``root``; True if it was a clean (not lazy) unmount, or nothing was mounted."""
        return mountpoints.unmount(root, ["fusermount3", "-u", os.fspath(root)])

    def stale_after_command(self, upper: str) -> bool:
        """Must a kept mount be closed after a command (which left the upper layer ``upper`` so)?"""
        return False

    def after_close(self, upper: str) -> None:
        """Bookkeeping on the upper layer once the mount is gone."""

    def __repr__(self) -> str:
        return f"<overlay backend {self.name}>"


def _fuse_problem() -> str | None:
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return f"/dev/fuse is not readable and writable by uid {os.geteuid()}"
    if os.geteuid() != 0 and shutil.which("fusermount3") is None:
        return "fusermount3 is not installed"
    return None


class PureBackend(MountBackend):
    name = "pure"
    enforces = "nothing: it cannot be mounted, so no command runs over it (Bash stays read-only)"
    mountable = False


TRANSPORT_ENV = "SPECULATE_FUSE_TRANSPORT"  # own | pyfuse3 | auto (the default): the fuse backend's transport
TRANSPORTS = ("own", "pyfuse3")  # what speaks to the kernel for our FUSE server (overlayfs.fuse.__main__)
PYFUSE3_UNAVAILABLE = "PYFUSE3_UNAVAILABLE"  # in the venv: why set-up could not install pyfuse3


def pyfuse3_problem() -> str | None:
    """None if pyfuse3 can be imported by our FUSE server here, else why not (set-up's note if it left one).
    Not imported here: it brings trio (~0.2 s) into a process that does not serve."""
    if importlib.util.find_spec("pyfuse3") is not None:
        return None
    note = Path(sys.prefix) / PYFUSE3_UNAVAILABLE
    with contextlib.suppress(OSError):
        return f"pyfuse3 is not installed: {note.read_text().strip()}"
    return "pyfuse3 is not installed (scripts/setup.sh installs it with libfuse3-dev and pkg-config)"


class FuseBackend(MountBackend):
    """Our FUSE server (:mod:`overlayfs.fuse`). The operations are one; the transport that speaks to the
    kernel is chosen per mount: the own ``/dev/fuse`` loop, and pyfuse3 (libfuse) where the own one is
    refused (it needs FUSE 7.31 with NO_OPEN and NO_OPENDIR support, and says so with a MountError) or
    where :data:`TRANSPORT_ENV` names it. :attr:`transport` and :attr:`enforces` say which served last."""

    name = "fuse"
    told_of_writes = True
    pinned: ClassVar[str | None] = None  # a transport this entry always uses

    def __init__(self) -> None:
        self.transport: str | None = None  # the transport of this backend's last mount
        self.own_refused: str | None = None  # why the own transport was refused here (pyfuse3 serves then)
        self.enforces = self._enforces()

    def _enforces(self) -> str:
        if self.transport is None:
            how = "transport: own, else pyfuse3" if self.pinned is None else f"transport: {self.pinned}"
        elif self.own_refused is not None:
            how = f"transport: {self.transport}; the own transport was refused: {self.own_refused}"
        else:
            how = f"transport: {self.transport}"
        return (
            f"our FUSE server on the host ({how}): it records what each command read and the bases of "
            "what it changed"
        )

    def transports(self) -> tuple[str, ...]:
        """The transports a mount tries, in order. Raises MountError for a bad :data:`TRANSPORT_ENV`."""
        want = self.pinned or os.environ.get(TRANSPORT_ENV) or "auto"
        if want in TRANSPORTS:
            return (want,)
        if want != "auto":
            raise MountError(f"{TRANSPORT_ENV}={want!r}: expected {', '.join(TRANSPORTS)} or auto")
        if self.own_refused is not None:
            return ("pyfuse3",)
        return ("own", "pyfuse3") if pyfuse3_problem() is None else ("own",)

    def unavailable_reason(self) -> str | None:
        why = _fuse_problem()
        if why is None:
            try:
                only_pyfuse3 = self.transports() == ("pyfuse3",)
            except MountError as e:
                return str(e)
            why = pyfuse3_problem() if only_pyfuse3 else None
        return why

    def start(self, ov: kernel.Layers, root: Path, *, snapshot: bool) -> Started:
        failed: list[str] = []
        for transport in self.transports():
            try:
                started = _start_fuse(ov, root, transport=transport)
            except MountError as e:
                failed.append(f"{transport} transport: {e}")
                if mountpoints.is_mounted(root):
                    mountpoints.lazy_unmount(root)
                continue
            if failed:  # the own transport was refused here: the next mounts go straight to pyfuse3
                self.own_refused = failed[0]
                log.warning("the own FUSE transport was refused, pyfuse3 serves: %s", failed[0])
            self.transport = transport
            self.enforces = self._enforces()
            return started
        raise MountError("; ".join(failed))


class Pyfuse3Backend(FuseBackend):
    """Our FUSE server on pyfuse3 whatever the kernel offers: the card's transport, named explicitly."""

    name = "fuse-pyfuse3"
    pinned = "pyfuse3"


class KernelBackend(MountBackend):
    name = "kernel"
    enforces = (
        "kernel overlayfs, mounted per command inside the sandbox's private mount namespace; the whole "
        "project counts as read (a watch of the real tree), bases recorded after each command"
    )
    host_mount_needs_root = True
    snapshots_lower = True
    mounted_per_command = True

    def unavailable_reason(self) -> str | None:
        return kernel.kernel_available()

    def start(self, ov: kernel.Layers, root: Path, *, snapshot: bool) -> Started:
        if os.geteuid() != 0:
            raise MountError(
                "kernel overlayfs is only mountable inside a private namespace without root: "
                "use overlayfs.sandbox.run_in_overlay(ov, argv, ...)"
            )
        snap = kernel.snapshot(Path(ov.lower)) if snapshot else None
        kernel.mount_host(ov, root, owner=os.getpid())
        return Started(snapshot=snap)

    def unmount(self, root: Path) -> bool:
        return mountpoints.unmount(root, ["umount", os.fspath(root)])


class FuseOverlayfsBackend(MountBackend):
    name = "fuse-overlayfs"
    enforces = (
        "fuse-overlayfs (the C reference), started in a private mount namespace; the whole project "
        "counts as read (a watch of the real tree), bases recorded after each command"
    )
    snapshots_lower = True

    def unavailable_reason(self) -> str | None:
        if shutil.which("fuse-overlayfs") is None:
            return "fuse-overlayfs is not installed"
        return _fuse_problem()

    def start(self, ov: kernel.Layers, root: Path, *, snapshot: bool) -> Started:
        work = Path(ov.workdir) / "fuse-overlayfs"
        work.mkdir(parents=True, exist_ok=True)
        snap = kernel.snapshot(Path(ov.lower)) if snapshot else None
        if getattr(ov, "layer", None) is not None:
            from overlayfs.fuse_overlayfs import start_on_layer

            return Started(proc=start_on_layer(ov, root), snapshot=snap)
        opts = f"lowerdir={ov.lower},upperdir={ov.upper},workdir={work}"
        r = subprocess.run(["fuse-overlayfs", "-o", opts, os.fspath(root)], capture_output=True, timeout=30)
        if r.returncode != 0:
            raise MountError(f"fuse-overlayfs failed: {r.stderr.decode(errors='replace').strip()}")
        return Started(snapshot=snap)

    def stale_after_command(self, upper: str) -> bool:
        return layer.fuse_overlayfs_markers(upper)  # its markers are rewritten as it closes

    def after_close(self, upper: str) -> None:
        layer.adopt_fuse_overlayfs(upper)


def _start_fuse(ov: kernel.Layers, root: Path, *, transport: str, ready_timeout: float = 30.0) -> Started:
    env = dict(os.environ)
    env["PYTHONPATH"] = _PKG_PARENT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    logf = open(Path(ov.metadir) / "fuse-server.log", "ab")
    control, theirs = socket.socketpair()
    try:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "overlayfs.fuse",
                os.fspath(ov.lower),
                os.fspath(ov.upper),
                os.fspath(ov.metadir),
                os.fspath(root),
                "--owner-pid",
                str(os.getpid()),
                "--workdir",
                os.fspath(ov.workdir),
                "--control-fd",
                str(theirs.fileno()),
                "--transport",
                transport,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=logf,
            env=env,
            cwd="/",
            start_new_session=True,
            pass_fds=(theirs.fileno(),),
        )  # a ^C must not kill the server under a mount
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
        mountpoints.reap(proc)
        tail = (Path(ov.metadir) / "fuse-server.log").read_bytes()[-2000:].decode(errors="replace")
        raise MountError(f"FUSE server did not come up at {root}: {tail.strip() or 'no output'}")
    _set_read_ahead(root)
    return Started(proc=proc, control=control, transport=transport)


def _set_read_ahead(root: Path) -> None:
    dev = os.stat(root).st_dev
    with contextlib.suppress(OSError):
        Path(f"/sys/class/bdi/{os.major(dev)}:{os.minor(dev)}/read_ahead_kb").write_text(f"{READ_AHEAD_KB}\n")


# -- the registry ----------------------------------------------------------------------------------
REGISTRY: dict[str, MountBackend] = {
    b.name: b
    for b in (PureBackend(), FuseBackend(), Pyfuse3Backend(), KernelBackend(), FuseOverlayfsBackend())
}
BACKENDS = tuple(REGISTRY)
MOUNTABLE = tuple(name for name, b in REGISTRY.items() if b.mountable)
AUTO_ORDER = ("kernel", "fuse")  # what "auto" tries, best first; "pure" when neither works


def get(name: str) -> MountBackend:
    """The backend registered as ``name``. Raises ValueError naming the known ones."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"unknown backend {name!r}; expected one of {', '.join(BACKENDS)} or 'auto'"
        ) from None


def unavailable_reason(backend: str) -> str | None:
    """None if ``backend`` works on this machine, else a sentence saying why not."""
    return get(backend).unavailable_reason()


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
    for b in AUTO_ORDER:
        if get(b).host_mount_needs_root and need_host_mount and os.geteuid() != 0:
            continue
        if unavailable_reason(b) is None:
            return b
    return "pure"
