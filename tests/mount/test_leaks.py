"""Crashes leave no stale mounts: a killed server, a killed owner, a dead owner's kernel mount."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from overlayfs.mount import cleanup_stale, open_mount
from overlayfs.view import Overlay
from tests.mount.conftest import require

ROOT = Path(__file__).resolve().parents[2]


def _mounted(mp: str) -> bool:
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == mp for line in f)


def _wait(cond: object, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


@pytest.mark.fuse
def test_killed_server_is_unmounted_on_close(overlay: Overlay) -> None:
    require("fuse")
    m = open_mount(overlay, "fuse")
    assert m._proc is not None
    os.kill(m._proc.pid, signal.SIGKILL)
    m._proc.wait()
    with pytest.raises(OSError) as e:
        os.listdir(m.root)
    assert e.value.errno == errno.ENOTCONN
    m.close()
    assert not _mounted(str(m.root)) and not m.root.exists()


def _owner_child(overlay: Overlay, backend: str) -> tuple[subprocess.Popen[str], str]:
    code = (
        "import sys; from overlayfs.view import Overlay; from overlayfs.mount import open_mount\n"
        f"m = open_mount(Overlay({str(overlay.lower)!r}, upper={str(overlay.upper)!r}), {backend!r})\n"
        "print(m.root, flush=True); sys.stdin.read()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    mp = child.stdout.readline().strip()
    assert mp and _mounted(mp)
    return child, mp


@pytest.mark.fuse
def test_server_unmounts_when_its_owner_dies(overlay: Overlay) -> None:
    require("fuse")
    child, mp = _owner_child(overlay, "fuse")
    child.kill()
    child.communicate()
    assert _wait(lambda: not _mounted(mp)), "the orphaned FUSE server left its mount"
    cleanup_stale()  # removes the empty mountpoint directory too
    assert not Path(mp).exists()


@pytest.mark.privileged
def test_dead_owners_kernel_mount_is_cleaned(overlay: Overlay) -> None:
    require("kernel")
    if os.geteuid() != 0:
        pytest.skip("host kernel overlay mounts need root")
    child, mp = _owner_child(overlay, "kernel")
    child.kill()
    child.communicate()
    assert _mounted(mp)  # nothing serves a kernel mount: it stays until someone cleans up
    assert mp in cleanup_stale()
    assert not _mounted(mp) and not Path(mp).exists()
