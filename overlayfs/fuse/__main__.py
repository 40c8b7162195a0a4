"""The FUSE server process: mount, print ``ready``, serve until unmounted, signalled, or orphaned."""

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
from pathlib import Path
from types import FrameType

from overlayfs.fuse.ops import OverlayOps
from overlayfs.fuse.server import Server, mount_device, unmount_lazily

FSNAME_PREFIX = "speculate-overlay"
log = logging.getLogger("overlayfs.fuse")


def _watch_owner(owner: int, mountpoint: Path) -> None:
    """The owner died without unmounting (crash, SIGKILL): unmount, which ends the request loop."""
    try:
        fd = os.pidfd_open(owner)
    except OSError:
        unmount_lazily(mountpoint)
        return
    try:
        select.select([fd], [], [])
    finally:
        os.close(fd)
    unmount_lazily(mountpoint)


def _control(server: Server, ops: OverlayOps, sock: socket.socket) -> None:
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
                    with server.lock:
                        notes = ops.external_changes([str(p) for p in paths])
                    notes()
                    answer = b"ok\n"
                except Exception as e:  # the owner then mounts afresh; the server keeps serving
                    log.exception("control message failed")
                    answer = f"error {type(e).__name__}\n".encode()
                sock.sendall(answer)


def _stop(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


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
    fd = mount_device(root, fsname=f"{FSNAME_PREFIX}.{os.getpid()}", subtype="speculate")
    server = Server(ops, fd)
    ops.invalidate_inode, ops.invalidate_entry = server.invalidate_inode, server.invalidate_entry
    try:
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        if args.owner_pid is not None:
            threading.Thread(target=_watch_owner, args=(args.owner_pid, root), daemon=True).start()
        if args.control_fd is not None:
            sock = socket.socket(fileno=args.control_fd)
            threading.Thread(target=_control, args=(server, ops, sock), daemon=True).start()
        server.serve()
    finally:
        unmount_lazily(root)  # a no-op once unmounted from outside
        os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
