"""Recovery at start-up: finish or undo a promotion that a killed process left, and drop its overlays.

Every entry point that opens a project calls :func:`recover_project` first (the REPL, ``speculate bench``,
``Session``, ``speculate recover``); ``Overlay`` itself calls :func:`recover_journal` (the journal only).
When nothing is pending both cost a ``stat`` or two: no lock is taken.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from overlayfs.promote import settle
from overlayfs.state import (
    LOCK_TIMEOUT,
    ProjectState,
    locked,
    owner_alive,
    pending,
    project_state,
    remove_tree,
    stale_overlays,
    state_root,
    wait_disposals,
)


@dataclass(frozen=True)
class Recovery:
    """What a recovery did for one project."""

    project: Path
    action: str | None = None  # "rolled forward", "rolled back", ...; None: no promotion was pending
    changes: int = 0  # paths the interrupted promotion carried
    overlays_removed: int = 0  # speculation overlays of dead processes

    def line(self) -> str:
        parts = []
        if self.action is not None:
            n = self.changes
            parts.append(f"{self.action} an interrupted acceptance of {n} change{'' if n == 1 else 's'}")
        if self.overlays_removed:
            n = self.overlays_removed
            parts.append(f"removed {n} abandoned speculation overlay{'' if n == 1 else 's'}")
        return f"recovered: {' and '.join(parts)} in {self.project}"


def _settle(ps: ProjectState) -> tuple[str | None, int]:
    done = settle(ps)
    return (None, 0) if done is None else (done[0], len(done[1]["promoted"]))


def recover_journal(project: str | os.PathLike[str], *, timeout: float = LOCK_TIMEOUT) -> Recovery | None:
    """Settle a pending promotion journal of ``project`` (what ``Overlay`` does when it opens)."""
    ps = project_state(project)
    if not pending(ps):
        return None
    with locked(ps, timeout):  # waits for a live promoter, whose journal is gone when it lets go
        action, n = _settle(ps)
    return Recovery(ps.project, action, n) if action is not None else None


def recover_project(project: str | os.PathLike[str], *, timeout: float = LOCK_TIMEOUT) -> Recovery | None:
    """Settle a pending promotion of ``project`` and remove overlays whose owning process is gone.

    Returns None when nothing was pending. Raises FileNotFoundError / NotADirectoryError naming
    ``project`` when it is not a directory."""
    if not os.path.exists(project):
        raise FileNotFoundError(errno.ENOENT, "project directory does not exist", os.fspath(project))
    if not os.path.isdir(project):
        raise NotADirectoryError(errno.ENOTDIR, "project is not a directory", os.fspath(project))
    ps = project_state(project)
    stale = stale_overlays(ps)
    if not pending(ps) and not stale:
        return None
    with locked(ps, timeout):
        action, n = _settle(ps)  # first: rolling forward may finish an upper layer among the stale ones
        wait_disposals(ps.dir)
        stale = stale_overlays(ps)
        for d in stale:
            remove_tree(d)
    if action is None and not stale:
        return None
    return Recovery(ps.project, action, n, len(stale))


def recover_all(*, timeout: float = LOCK_TIMEOUT) -> list[Recovery]:
    """Recover every project in the state dir; forget those whose directory no longer exists."""
    out = []
    base = state_root() / "projects"
    try:
        keys = sorted(os.listdir(base))
    except FileNotFoundError:
        return out
    for key in keys:
        try:
            project = Path(os.fsdecode((base / key / "project").read_bytes()))
        except OSError:
            continue  # being created or removed right now, or not ours
        if project.is_dir():
            rec = recover_project(project, timeout=timeout)
            if rec is not None:
                out.append(rec)
        elif not any(owner_alive(n) for n in _names(base / key / "overlays")):
            remove_tree(base / key)  # a removed temp project (e.g. a killed benchmark's copies)
    return out


def _names(d: Path) -> list[str]:
    try:
        return os.listdir(d)
    except FileNotFoundError:
        return []
