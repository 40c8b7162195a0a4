"""The FUSE server process: mount, print ``ready``, serve until unmounted, signalled, or orphaned.

``--transport`` picks what speaks to the kernel for the same operations (:class:`.ops.OverlayOps`): ``own``
(:mod:`.server`, the request loop on ``/dev/fuse`` itself) or ``pyfuse3`` (:mod:`.pyfuse3_transport`,
libfuse). The owner watch and the control channel are the same for both.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import select
import signal
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from overlayfs.fuse.ops import OverlayOps
from overlayfs.fuse.server import Server, abandon, mount_device, unmount_lazily
from overlayfs.fuse.trace import Trace, TracedServer

FSNAME_PREFIX = "speculate-overlay"
log = logging.getLogger("overlayfs.fuse")


def _watch_owner(owner: int, mountpoint: Path) -> None:
    """The owner died without unmounting (crash, SIGKILL): unmount and end the server, whatever its request
    loop is doing (a request it cannot finish must not keep it, or a process waiting on it, alive)."""
    try:
        fd = os.pidfd_open(owner)
    except OSError:
        abandon(mountpoint)
    try:
        select.select([fd], [], [])
    finally:
        os.close(fd)
    abandon(mountpoint)


def _control(lock: threading.Lock, ops: OverlayOps, sock: socket.socket) -> None:
    """The owner's messages (one JSON list of upper-layer paths per line, changed behind the mount's back by
    the pure view): each is applied under the server's lock, the kernel told outside it, then ``ok``."""
    buf = b""
    with sock:
        while True:
            try:
                chunk = sock.recv(1 << 16)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    paths = json.loads(line.decode("utf-8", "surrogateescape"))
                    with lock:
                        notes = ops.external_changes([str(p) for p in paths])
                    notes()
                    answer = b"ok\n"
                except Exception as e:  # the owner then mounts afresh; the server keeps serving
                    log.exception("control message failed")
                    answer = f"error {type(e).__name__}\n".encode()
                sock.sendall(answer)


def _stop(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def _mount(
    transport: str, ops: OverlayOps, root: Path, fsname: str, trace: Trace | None
) -> tuple[threading.Lock, Callable[[], None], Callable[[], None]]:
    """Mount ``root`` with ``transport``; returns the lock its requests are served under, what serves them
    until the filesystem is unmounted, and what closes it."""
    if transport == "pyfuse3":
        from overlayfs.fuse.pyfuse3_transport import Pyfuse3Transport  # trio and libfuse only for it

        t = Pyfuse3Transport(ops, root, fsname=fsname, trace=trace)
        return t.lock, t.serve, t.close
    fd = mount_device(root, fsname=fsname, subtype="speculate")
    try:
        server = Server(ops, fd) if trace is None else TracedServer(ops, fd, trace)
    except BaseException:  # refused at INIT (ProtocolRefused): leave no mount for the next transport to meet
        unmount_lazily(root)
        os.close(fd)
        raise
    ops.invalidate_inode, ops.invalidate_entry = server.invalidate_inode, server.invalidate_entry

    def close() -> None:
        unmount_lazily(root)  # a no-op once unmounted from outside
        os.close(fd)

    return server.lock, server.serve, close


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m overlayfs.fuse", description=__doc__)
    ap.add_argument("lower", type=Path)
    ap.add_argument("upper", type=Path)
    ap.add_argument("metadir", type=Path)
    ap.add_argument("mountpoint", type=Path)
    ap.add_argument("--owner-pid", type=int, default=None, help="unmount and exit when this process ends")
    ap.add_argument("--workdir", type=Path, default=None, help="the overlay's work dir (upper's filesystem)")
    ap.add_argument(
        "--control-fd",
        type=int,
        default=None,
        help="a unix socket on which the owner names upper-layer paths it changed itself",
    )
    ap.add_argument(
        "--transport",
        choices=("own", "pyfuse3"),
        default="own",
        help="own: the request loop on /dev/fuse itself; pyfuse3: libfuse through pyfuse3 on trio",
    )
    ap.add_argument("--debug", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING,
        format="overlayfs.fuse[%(process)d] %(levelname)s %(message)s",
    )
    for name in ("lower", "upper", "metadir", "mountpoint"):
        p: Path = getattr(args, name)
        if not p.is_dir():
            ap.error(f"{name} {str(p)!r} is not a directory")
    # A bounded layer is reached as /proc/<owner>/fd/<n>/...: resolving that magic link would give "/".
    upper = args.upper.absolute() if args.upper.is_relative_to("/proc") else args.upper.resolve()
    work = args.workdir.absolute() if args.workdir is not None else None
    ops = OverlayOps(args.lower.resolve(), upper, args.metadir.resolve(), work)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop)
    root = args.mountpoint
    lock, serve, close = _mount(args.transport, ops, root, f"{FSNAME_PREFIX}.{os.getpid()}", Trace.from_env())
    try:
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        if args.owner_pid is not None:
            threading.Thread(target=_watch_owner, args=(args.owner_pid, root), daemon=True).start()
        if args.control_fd is not None:
            sock = socket.socket(fileno=args.control_fd)
            threading.Thread(target=_control, args=(lock, ops, sock), daemon=True).start()
        serve()
    finally:
        close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
