"""Our mountpoints: finding them, unmounting one reliably (lazily when busy), and cleaning up after owners
that died. Which command a normal user unmounts with is the backend's (:mod:`overlayfs.backends`).

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
import subprocess
import tempfile
from pathlib import Path

log = logging.getLogger("overlayfs.mount")

MNT_PREFIX = "speculate-mnt-"
_MNT_RE = re.compile(rf"/{MNT_PREFIX}(\d+)-[^/]*$")


def mountpoints() -> dict[str, str]:
    """Mountpoint -> filesystem type, for this process's mount namespace."""
    out: dict[str, str] = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            mp = left.split()[4].replace("\\040", " ")
            out[mp] = right.split()[0]
    return out


def is_mounted(root: Path) -> bool:
    return os.fspath(root) in mountpoints()


_MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)


def unmount(root: Path, cmd: list[str]) -> bool:
    """Unmount ``root`` (without root, with ``cmd``); True if it was a clean (not lazy) unmount, or nothing
    was mounted."""
    if not is_mounted(root):
        return True
    if os.geteuid() == 0:  # umount(2) itself: fusermount3 -u and umount(8) are a fork and exec more
        if _libc.umount2(os.fsencode(root), 0) == 0:
            return True
        log.warning("unmount of %s failed (%s); unmounting lazily", root, os.strerror(ctypes.get_errno()))
        lazy_unmount(root)
        return False
    r = subprocess.run(cmd, capture_output=True, timeout=30)
    if r.returncode != 0:  # busy (a process still has a cwd or fd inside): detach it lazily
        log.warning("unmount of %s failed (%s); unmounting lazily", root, r.stderr.decode(errors="replace"))
        lazy_unmount(root)
        return False
    return True


def lazy_unmount(root: Path) -> None:
    if os.geteuid() == 0 and _libc.umount2(os.fsencode(root), _MNT_DETACH) == 0:
        return
    for cmd in (["fusermount3", "-u", "-z"], ["umount", "-l"]):
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            if subprocess.run([*cmd, os.fspath(root)], capture_output=True, timeout=30).returncode == 0:
                return


def reap(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
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
    for mp in mountpoints():
        m = _MNT_RE.search(mp)
        if m is None or os.path.exists(f"/proc/{m.group(1)}"):
            continue
        lazy_unmount(Path(mp))
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
