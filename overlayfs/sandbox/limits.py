"""Whole-sandbox bounds that rlimits cannot give: a cgroup for processes and memory, and the upper layer's size.

A cgroup is made only where this process may (root with a writable cgroupfs, v1 or v2); elsewhere the
per-process rlimits of :mod:`._inner` are the bound, and :func:`open_cgroup` says so. The upper layer is
measured while the command runs (allocated blocks, every ~100 ms, less often for a large layer) and the
sandbox is killed once it crosses ``upper_bytes``; RLIMIT_FSIZE already stops any single file there.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
PREFIX = "speculate-sandbox-"  # leaf cgroups are named PREFIX<owner pid>-<random>
# Leaves of this process's commands still running (or about to be joined): the sweep of a concurrent
# command must not take them. An empty leaf can be removed, and the stage that joins it would then fail.
_LIVE: set[str] = set()
_LIVE_LOCK = threading.Lock()


@dataclass
class Cgroup:
    """Leaf cgroups made for one command: ``procs`` files to join; ``enforced`` says what bounds what."""

    dirs: list[Path] = field(default_factory=list)
    procs: list[str] = field(default_factory=list)
    enforced: dict[str, str] = field(default_factory=dict)


def _own_paths() -> dict[str, str]:
    """Controller name (v1) or "" (v2) -> this process's cgroup path."""
    out: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, ctrls, path = line.split(":", 2)
            for c in ctrls.split(",") if ctrls else [""]:
                out[c] = path
    return out


def _leaf(parent: Path, name: str) -> Path | None:
    leaf = parent / name
    try:
        leaf.mkdir()
    except OSError:
        return None
    return leaf


def _try_write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
    except OSError:
        return False
    return True


@contextlib.contextmanager
def open_cgroup(*, processes: int, memory_bytes: int) -> Iterator[Cgroup]:
    """Make leaf cgroups bounding processes and memory where possible; remove them afterwards."""
    cg = Cgroup()
    name = f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"
    own = _own_paths()
    with _LIVE_LOCK:
        _LIVE.add(name)
    if os.geteuid() == 0:
        _sweep(own)
        v2 = own.get("")
        if v2 is not None and (CGROUP_ROOT / "cgroup.controllers").exists():
            parent = CGROUP_ROOT / v2.lstrip("/")
            ctrls = set((parent / "cgroup.subtree_control").read_text().split()) \
                if (parent / "cgroup.subtree_control").exists() else set()
            if {"pids", "memory"} & ctrls and (leaf := _leaf(parent, name)) is not None:
                cg.dirs.append(leaf)
                cg.procs.append(os.fspath(leaf / "cgroup.procs"))
                if "pids" in ctrls and _try_write(leaf / "pids.max", str(processes)):
                    cg.enforced["processes"] = f"cgroup v2 pids.max={processes}"
                if "memory" in ctrls and _try_write(leaf / "memory.max", str(memory_bytes)):
                    cg.enforced["memory"] = f"cgroup v2 memory.max={memory_bytes}"
        for ctrl, knob, what, value in (("pids", "pids.max", "processes", processes),
                                        ("memory", "memory.limit_in_bytes", "memory", memory_bytes)):
            if what in cg.enforced or ctrl not in own or not (CGROUP_ROOT / ctrl / "cgroup.procs").exists():
                continue
            leaf = _leaf(CGROUP_ROOT / ctrl / own[ctrl].lstrip("/"), name)
            if leaf is None:
                continue
            cg.dirs.append(leaf)
            if _try_write(leaf / knob, str(value)):
                cg.procs.append(os.fspath(leaf / "cgroup.procs"))
                cg.enforced[what] = f"cgroup v1 {knob}={value}"
    cg.enforced.setdefault("processes", f"RLIMIT_NPROC={processes}" if os.geteuid() != 0 else
                           "not enforced (root ignores RLIMIT_NPROC and no cgroup could be made)")
    cg.enforced.setdefault("memory", f"RLIMIT_DATA={memory_bytes} per process")
    try:
        yield cg
    finally:
        for d in cg.dirs:
            _remove_cgroup(d)
        with _LIVE_LOCK:
            _LIVE.discard(name)


def _remove_cgroup(d: Path) -> None:
    # The sandbox was killed or has exited, but its last processes may take a few ms to leave the
    # cgroup; rather than wait here (on every command), a busy one is left to the next sweep.
    if (d / "cgroup.kill").exists():  # v2 only; in v1 the PID namespace is already dead
        with contextlib.suppress(OSError):
            (d / "cgroup.kill").write_text("1")
    with contextlib.suppress(OSError):
        d.rmdir()


def _sweep(own: dict[str, str]) -> None:
    """Remove leaf cgroups left busy by earlier commands of this process or by dead processes."""
    for ctrl, path in own.items():
        parent = (CGROUP_ROOT / ctrl if ctrl else CGROUP_ROOT) / path.lstrip("/")
        try:
            leftovers = [p for p in parent.iterdir() if p.name.startswith(PREFIX)]
        except OSError:
            continue
        with _LIVE_LOCK:
            live = set(_LIVE)
        for p in leftovers:
            owner = p.name[len(PREFIX):].split("-", 1)[0]
            if p.name in live:
                continue
            if owner == str(os.getpid()) or not os.path.exists(f"/proc/{owner}"):
                with contextlib.suppress(OSError):
                    p.rmdir()


def upper_usage(upper: str) -> int:
    """Bytes allocated under ``upper`` (blocks, so sparse files count what they really use)."""
    total = 0
    stack = [upper]
    while stack:
        d = stack.pop()
        try:
            it = os.scandir(d)
        except OSError:
            continue
        with it:
            for e in it:
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                total += st.st_blocks * 512
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
    return total


class UpperWatch:
    """Polls the upper layer's size in a thread while a command runs; calls ``on_exceed`` once if over."""

    def __init__(self, upper: str, limit: int, on_exceed: Callable[[], None]) -> None:
        self.upper, self.limit, self.on_exceed = upper, limit, on_exceed
        self.exceeded = False
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="upper-watch", daemon=True)

    def __enter__(self) -> UpperWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.check()  # the last writes before exit count too

    def check(self) -> bool:
        used = upper_usage(self.upper)
        self.peak = max(self.peak, used)
        if used > self.limit and not self.exceeded:
            self.exceeded = True
            self.on_exceed()
        return self.exceeded

    def _loop(self) -> None:
        interval = 0.1
        while not self._stop.wait(interval):
            t0 = time.monotonic()
            if self.check():
                return
            interval = max(0.1, 10 * (time.monotonic() - t0))  # at most ~10% of a core on a huge layer
