"""Fixtures for the mounted-backend suite: a git-tracked sample project, overlays on it, leak checks."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from overlayfs import backends
from overlayfs.mount import MNT_PREFIX, unavailable_reason
from overlayfs.view import Overlay

SAMPLE = Path(__file__).resolve().parents[2] / "bench" / "scenarios" / "workspaces" / "sample_project"
MARKS = {
    "fuse": [pytest.mark.fuse],
    "fuse-pyfuse3": [pytest.mark.fuse],
    "fuse-overlayfs": [pytest.mark.fuse],
    "kernel": [pytest.mark.privileged],
    "pure": [],
}
# Our FUSE server has two transports for the same operations: a test that names ``fuse`` (the transport it
# chooses: the own one on a kernel that offers what it needs) runs on ``fuse-pyfuse3`` too.
ALSO = {"fuse": ("fuse-pyfuse3",)}


def backend_params(*names: str) -> list[object]:
    wanted = list(dict.fromkeys(m for n in names for m in (n, *ALSO.get(n, ()))))
    return [pytest.param(n, marks=MARKS[n], id=n) for n in wanted]


def require(backend: str) -> None:
    why = unavailable_reason(backend)
    if why is not None:
        pytest.skip(f"backend {backend} unavailable here: {why}")


def require_host_mount(backend: str) -> None:
    """As :func:`require`, for a mount on the host, outside the sandbox's namespaces: kernel overlayfs needs
    root there (a normal user mounts it only inside the sandbox's user namespace)."""
    require(backend)
    if backends.get(backend).host_mount_needs_root and os.geteuid() != 0:
        pytest.skip(f"backend {backend} mounts on the host only as root")


def tree_digest(root: Path) -> str:
    """Everything about a tree that a speculation must not change: names, types, modes, content, links."""
    h = hashlib.sha256()
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(dirs + files):
            p = Path(dirpath, name)
            st = p.lstat()
            h.update(f"{p.relative_to(root)}\0{st.st_mode}\0{st.st_mtime_ns}\0".encode())
            if p.is_symlink():
                h.update(os.readlink(p).encode())
            elif p.is_file():
                h.update(p.read_bytes())
    return h.hexdigest()


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


@pytest.fixture(scope="session")
def sample_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dst = tmp_path_factory.mktemp("template") / "proj"
    shutil.copytree(SAMPLE, dst, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache", ".ruff_cache"))
    _git(dst, "init", "-q")
    _git(dst, "add", "-A")
    _git(dst, "commit", "-qm", "init")
    return dst


@pytest.fixture
def project(sample_template: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "proj"
    shutil.copytree(sample_template, dst, symlinks=True)
    return dst


@pytest.fixture
def overlay(project: Path, tmp_path: Path) -> Iterator[Overlay]:
    ov = Overlay(project, upper=tmp_path / "layers" / "upper")
    yield ov


def _our_mounts() -> list[str]:
    with open("/proc/self/mountinfo") as f:
        return [line for line in f if f"{MNT_PREFIX}{os.getpid()}-" in line]


def _our_servers() -> list[int]:
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"overlayfs.fuse" in cmd and str(os.getpid()).encode() in cmd:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0]
            except OSError:
                continue
            if state != "Z":
                out.append(int(pid))
    return out


@pytest.fixture(autouse=True)
def no_leaks() -> Iterator[None]:
    yield
    assert _our_mounts() == [], "a test left a mount behind"
    assert _our_servers() == [], "a test left a FUSE server running"


T = TypeVar("T")


def kill_server_mid_command(run: Callable[[str], T], kill_server: Callable[[], None], *, after: str) -> T:
    """``run(command)`` in a thread, where the command sleeps inside the view and then runs ``after``; once
    the sleep is seen running (an event, not a timer), ``kill_server()``, then the sleep: ``after`` runs on
    a mount whose server is gone. Returns what ``run`` returned."""
    mark = f"{1000 + os.getpid() % 1000}.{threading.get_ident() % 997}"  # a sleep nobody else runs
    done: list[T] = []
    runner = threading.Thread(target=lambda: done.append(run(f"sleep {mark}; {after}")))
    runner.start()
    try:
        deadline = time.monotonic() + 30
        pids: list[str] = []
        while not pids and runner.is_alive() and time.monotonic() < deadline:
            pids = subprocess.run(
                ["pgrep", "-fx", f"sleep {mark}"], capture_output=True, text=True
            ).stdout.split()
            time.sleep(0.01)
        assert pids, "the command never started sleeping inside the view"
        kill_server()
        for pid in pids:
            os.kill(int(pid), signal.SIGKILL)
    finally:
        runner.join(60)
    assert done, "the command did not return"
    return done[0]
