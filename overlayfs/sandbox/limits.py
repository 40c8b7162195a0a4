"""Whole-sandbox bounds that rlimits cannot give: a cgroup for processes and memory; noticing that the
upper layer is full.

A cgroup is made only where this process may (root with a writable cgroupfs, v1 or v2); elsewhere the
per-process rlimits of the inner stage are the bound, and :func:`open_cgroup` says so. The upper layer's
bytes and inodes are bounded by its filesystem (:mod:`overlayfs.bounded`); :class:`LayerWatch` notices a
command reaching that bound, to stop it and flag it.
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from overlayfs.bounded import BoundedLayer

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
            ctrls = (
                set((parent / "cgroup.subtree_control").read_text().split())
                if (parent / "cgroup.subtree_control").exists()
                else set()
            )
            if {"pids", "memory"} & ctrls and (leaf := _leaf(parent, name)) is not None:
                cg.dirs.append(leaf)
                cg.procs.append(os.fspath(leaf / "cgroup.procs"))
                if "pids" in ctrls and _try_write(leaf / "pids.max", str(processes)):
                    cg.enforced["processes"] = f"cgroup v2 pids.max={processes}"
                if "memory" in ctrls and _try_write(leaf / "memory.max", str(memory_bytes)):
                    cg.enforced["memory"] = f"cgroup v2 memory.max={memory_bytes}"
        for ctrl, knob, what, value in (
            ("pids", "pids.max", "processes", processes),
            ("memory", "memory.limit_in_bytes", "memory", memory_bytes),
        ):
            if what in cg.enforced or ctrl not in own or not (CGROUP_ROOT / ctrl / "cgroup.procs").exists():
                continue
            leaf = _leaf(CGROUP_ROOT / ctrl / own[ctrl].lstrip("/"), name)
            if leaf is None:
                continue
            cg.dirs.append(leaf)
            if _try_write(leaf / knob, str(value)):
                cg.procs.append(os.fspath(leaf / "cgroup.procs"))
                cg.enforced[what] = f"cgroup v1 {knob}={value}"
    cg.enforced.setdefault(
        "processes",
        f"RLIMIT_NPROC={processes}"
        if os.geteuid() != 0
        else "not enforced (root ignores RLIMIT_NPROC and no cgroup could be made)",
    )
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
    me = str(os.getpid())
    for ctrl, path in own.items():
        parent = (
            os.path.join(CGROUP_ROOT, ctrl, path.lstrip("/"))
            if ctrl
            else os.path.join(CGROUP_ROOT, path.lstrip("/"))
        )
        try:
            leftovers = [
                n for n in os.listdir(parent) if n.startswith(PREFIX)
            ]  # strings: this runs per command
        except OSError:
            continue
        if not leftovers:
            continue
        with _LIVE_LOCK:
            live = set(_LIVE)
        for name in leftovers:
            owner = name[len(PREFIX) :].split("-", 1)[0]
            if name in live:
                continue
            if owner == me or not os.path.exists(f"/proc/{owner}"):
                with contextlib.suppress(OSError):
                    os.rmdir(os.path.join(parent, name))


class LayerWatch:
    """Notices, while a command runs, that its bounded upper layer is full; calls ``on_hit`` once.

    The filesystem enforces the bound (a write past it fails with ENOSPC, see :mod:`overlayfs.bounded`);
    this only notices it, so that a command stopped by the bound is killed at once instead of running on
    to its timeout, and is flagged even if it swallowed the error: a look at the layer's free bytes and
    inodes (``statvfs``, O(1) whatever the layer holds) every ``interval`` seconds and once at the end, and
    the FUSE server's mark of a refused write (``refused``, exact: it sees every ENOSPC). It also keeps
    the peak use, for the run's summary.
    """

    def __init__(
        self, layer: BoundedLayer, refused: Path, on_hit: Callable[[], None], *, interval: float = 0.01
    ) -> None:
        self.layer, self.refused, self.on_hit, self.interval = layer, refused, on_hit, interval
        self.hit: str | None = None  # "upper_bytes" or "upper_inodes"
        self.peak = (0, 0)  # bytes, inodes
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="layer-watch", daemon=True)

    def __enter__(self) -> LayerWatch:
        with contextlib.suppress(FileNotFoundError):
            self.refused.unlink()  # a mark from an earlier command is not this one's
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.check()  # the last writes before exit count too

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            if self.check():
                self.on_hit()  # while the command runs; a look after it has ended only flags it
                return

    def check(self) -> bool:
        """Look once; True when the layer is (or has been seen) at its bound."""
        u = self.layer.usage()
        self.peak = (max(self.peak[0], u.bytes_used), max(self.peak[1], u.inodes_used))
        if self.hit is None and (self.layer.at_bound(u) or self.refused.exists()):
            self.hit = "upper_inodes" if u.inodes_free < self.layer.bound.headroom[1] else "upper_bytes"
        return self.hit is not None
