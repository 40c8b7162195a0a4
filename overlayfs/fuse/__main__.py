"""The FUSE server process: mount, print ``ready``, serve until unmounted, signalled, or orphaned."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import pyfuse3
import trio

from overlayfs.fuse.ops import OverlayOps

FSNAME_PREFIX = "speculate-overlay"


async def _watch_parent(owner: int, scope: trio.CancelScope) -> None:
    # The owner died without unmounting (crash, SIGKILL): unmount rather than leave a mount behind.
    try:
        fd = os.pidfd_open(owner)
    except OSError:
        scope.cancel()
        return
    try:
        await trio.lowlevel.wait_readable(fd)
    finally:
        os.close(fd)
    scope.cancel()


async def _watch_signals(scope: trio.CancelScope) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for _ in signals:
            scope.cancel()
            return


async def _notify(fn: Callable[[], None]) -> None:
    with contextlib.suppress(OSError):
        await trio.to_thread.run_sync(fn)


async def _control(ops: OverlayOps, fd: int) -> None:
    """Our owner's messages (one JSON list of upper-layer paths per line, changed behind the mount's back by
    the pure view): each is applied, then answered ``ok``. Ends when the owner closes its end."""
    import json
    import socket

    sock = trio.socket.from_stdlib_socket(socket.socket(fileno=fd))
    buf = b""
    with sock:
        while True:
            chunk = await sock.recv(1 << 16)
            if not chunk:
                return
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    paths = json.loads(line.decode("utf-8", "surrogateescape"))
                    notes = ops.external_changes([str(p) for p in paths])
                    await trio.to_thread.run_sync(notes)  # the kernel's caches: outside the request loop
                    answer = b"ok\n"
                except Exception as e:  # the owner then mounts afresh; the server keeps serving
                    logging.getLogger("overlayfs.fuse").exception("control message failed")
                    answer = f"error {type(e).__name__}\n".encode()
                await sock.send(answer)


async def serve(ops: OverlayOps, mountpoint: str, owner: int | None, control: int | None = None) -> None:
    options = set(pyfuse3.default_options)
    options |= {f"fsname={FSNAME_PREFIX}.{os.getpid()}", "subtype=speculate"}
    if os.geteuid() == 0:
        options.add("allow_other")  # sandboxed commands may run under another uid
    pyfuse3.init(ops, mountpoint, options)
    try:
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        async with trio.open_nursery() as nursery:
            ops.notify = lambda fn: nursery.start_soon(_notify, fn)
            nursery.start_soon(_watch_signals, nursery.cancel_scope)
            if owner is not None:
                nursery.start_soon(_watch_parent, owner, nursery.cancel_scope)
            if control is not None:
                nursery.start_soon(_control, ops, control)
            await pyfuse3.main()
            nursery.cancel_scope.cancel()  # unmounted from outside
    finally:
        pyfuse3.close(unmount=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m overlayfs.fuse", description=__doc__)
    ap.add_argument("lower", type=Path)
    ap.add_argument("upper", type=Path)
    ap.add_argument("metadir", type=Path)
    ap.add_argument("mountpoint", type=Path)
    ap.add_argument("--owner-pid", type=int, default=None, help="unmount and exit when this process ends")
    ap.add_argument("--workdir", type=Path, default=None, help="the overlay's work dir (upper's filesystem)")
    ap.add_argument("--control-fd", type=int, default=None,
                    help="a unix socket on which the owner names upper-layer paths it changed itself")
    ap.add_argument("--debug", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING,
                        format="overlayfs.fuse[%(process)d] %(levelname)s %(message)s")
    for name in ("lower", "upper", "metadir", "mountpoint"):
        p: Path = getattr(args, name)
        if not p.is_dir():
            ap.error(f"{name} {str(p)!r} is not a directory")
    # A bounded layer is reached as /proc/<owner>/fd/<n>/...: resolving that magic link would give "/".
    upper = args.upper.absolute() if args.upper.is_relative_to("/proc") else args.upper.resolve()
    work = args.workdir.absolute() if args.workdir is not None else None
    ops = OverlayOps(args.lower.resolve(), upper, args.metadir.resolve(), work)
    trio.run(serve, ops, os.fspath(args.mountpoint), args.owner_pid, args.control_fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
