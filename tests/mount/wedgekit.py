"""What the wedge tests share: a FUSE mount that never answers (a hung network filesystem inside the project,
say), a command run under a guard that unwedges it if the code under test does not, and the checks run
as uid 65534 too (``python -m tests.mount.wedgekit BASE`` prints them as JSON)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from overlayfs.fuse.server import mount_device, unmount_lazily

FIFO_COMMAND = "mkfifo p && rm p && mkfifo q && touch r && mv r q && ls && echo done"


@contextlib.contextmanager
def black_hole(path: Path) -> Iterator[None]:
    """A FUSE filesystem mounted at ``path`` whose server never reads a request: whatever enters it waits
    (killably) until the descriptor closes, which aborts the connection."""
    fd = mount_device(path, fsname="speculate-test-black-hole", subtype="blackhole")
    try:
        yield
    finally:
        os.close(fd)
        unmount_lazily(path)


def our_servers(owner: int | None = None) -> list[int]:
    """FUSE server processes of ``owner`` (default: this process), by the owner pid on their command line."""
    me = str(owner or os.getpid()).encode()
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0]
        except OSError:
            continue
        if b"overlayfs.fuse" in cmd and me in cmd and state != "Z":
            out.append(int(pid))
    return out


def guarded(fn: Callable[[], Any], seconds: float, owner: int | None = None) -> tuple[Any, float, bool]:
    """``fn()``'s result, its duration, and whether it had to be unwedged: not done after ``seconds``, the
    FUSE servers of ``owner`` are killed (which aborts their connections) and it is waited for again."""
    box: list[Any] = []
    t0 = time.perf_counter()
    th = threading.Thread(target=lambda: box.append(fn()), daemon=True)
    th.start()
    th.join(seconds)
    wedged = th.is_alive()
    if wedged:
        for pid in our_servers(owner):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        th.join(30)
    return (box[0] if box else None), time.perf_counter() - t0, wedged


def checks(base: Path) -> dict[str, Any]:
    """The FIFO and the stuck-command checks on the fuse backend, on a project in ``base``."""
    from overlayfs import Overlay
    from overlayfs.sandbox import CancelToken, run_sandboxed

    proj = base / "proj"
    (proj / "hole").mkdir(parents=True, exist_ok=True)
    (proj / "a.txt").write_text("a\n")
    out: dict[str, Any] = {}
    ov = Overlay(proj)
    try:
        r, took, wedged = guarded(lambda: run_sandboxed(ov, FIFO_COMMAND, timeout=20, backend="fuse"), 25)
        out["fifo"] = {"wedged": wedged, "seconds": took, "exit": r and r.exit_code, "out": r and r.stdout}
        with black_hole(proj / "hole"):
            r, took, wedged = guarded(
                lambda: run_sandboxed(ov, "ls hole/; echo never", timeout=2, backend="fuse"), 25
            )
            out["stuck"] = {
                "wedged": wedged,
                "seconds": took,
                "timed_out": r and r.timed_out,
                "stderr": r and r.stderr,
            }
            token = CancelToken()
            threading.Timer(1.0, token.cancel).start()
            t = time.perf_counter()
            r, took, wedged = guarded(
                lambda: run_sandboxed(ov, "ls hole/", timeout=60, backend="fuse", cancel=token), 25
            )
            out["cancel"] = {
                "wedged": wedged,
                "after_cancel": time.perf_counter() - t - 1.0,
                "cancelled": r and r.cancelled,
            }
        r = run_sandboxed(ov, "cat a.txt", timeout=20, backend="fuse")
        out["next"] = {"exit": r.exit_code, "out": r.stdout}
    finally:
        ov.discard()
    return out


if __name__ == "__main__":
    json.dump(checks(Path(sys.argv[1])), sys.stdout)
