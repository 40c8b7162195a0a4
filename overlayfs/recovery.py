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

from overlayfs import journal, leftovers
from overlayfs.abandon import abandon
from overlayfs.journal import Unsettled
from overlayfs.promote import settle
from overlayfs.state import (
    LOCK_TIMEOUT,
    ProjectLocked,
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
    """What a recovery did for one project, or (``problem``) why it could not."""

    project: Path
    action: str | None = None  # "rolled forward", "rolled back", ...; None: no promotion was pending
    changes: int = 0  # paths the interrupted promotion carried
    overlays_removed: int = 0  # speculation overlays of dead processes
    problem: str | None = None  # set when a pending promotion could not be settled: what and what to do
    found: str | None = None  # where the journal was found when not under this path's key, and why
    message: str | None = None  # the whole line when ``action`` says it all (``--abandon``)

    @property
    def ok(self) -> bool:
        return self.problem is None

    def line(self) -> str:
        if self.problem is not None:
            return f"not recovered: {self.problem}"
        if self.message is not None:
            return self.message
        parts = []
        if self.action is not None:
            n = self.changes
            parts.append(f"{self.action} an interrupted acceptance of {n} change{'' if n == 1 else 's'}")
        if self.overlays_removed:
            n = self.overlays_removed
            parts.append(f"removed {n} abandoned speculation overlay{'' if n == 1 else 's'}")
        found = f" ({self.found})" if self.found else ""
        return f"recovered: {' and '.join(parts)} in {self.project}{found}"


def _settle(ps: ProjectState) -> tuple[str | None, int]:
    done = settle(ps)
    return (None, 0) if done is None else (done[0], len(done[1]["promoted"]))


def _problem(ps: ProjectState, e: OSError) -> Recovery:
    if isinstance(e, Unsettled):
        return Recovery(ps.project, problem=str(e))
    if isinstance(e, ProjectLocked):
        return Recovery(ps.project, problem=f"{e.strerror}: {ps.project}")
    return Recovery(
        ps.project,
        problem=f"its promotion state in {ps.dir} cannot be used ({e.strerror or e}"
        f"{f': {e.filename}' if e.filename else ''}); run `speculate recover {ps.project}` once "
        "that is fixed",
    )


def recover_journal(project: str | os.PathLike[str], *, timeout: float = LOCK_TIMEOUT) -> Recovery | None:
    """Settle a pending promotion journal of ``project`` (what ``Overlay`` does when it opens). A journal
    that cannot be settled now comes back as a Recovery with ``problem`` set (promotion refuses until then)."""
    ps = project_state(project)
    if not pending(ps):
        return None
    try:
        with locked(ps, timeout):  # waits for a live promoter, whose journal is gone when it lets go
            action, n = _settle(ps)
    except OSError as e:
        return _problem(ps, e)
    return Recovery(ps.project, action, n) if action is not None else None


def recover_project(
    project: str | os.PathLike[str],
    *,
    timeout: float = LOCK_TIMEOUT,
    scan: bool = False,
    adopt: bool = False,
) -> Recovery | None:
    """Settle a pending promotion of ``project`` and remove overlays whose owning process is gone.

    Returns None when nothing was pending, a Recovery with ``problem`` set when the promotion cannot be
    settled now (a read-only filesystem, another process holding the lock: never an exception, so that one
    project's trouble stops nobody). Raises FileNotFoundError / NotADirectoryError naming ``project`` when
    it is not a directory.

    With nothing pending under this path, another entry's journal that belongs to this directory (the same
    device/inode: moved; with ``scan``, its ``*.ovl-tmp`` names in the tree) is reported, or with ``adopt``
    finished here; with ``scan``, temp names no state explains are reported (the REPL and
    ``speculate recover`` scan; sessions and overlays only compare device/inode)."""
    if not os.path.exists(project):
        raise FileNotFoundError(errno.ENOENT, "project directory does not exist", os.fspath(project))
    if not os.path.isdir(project):
        raise NotADirectoryError(errno.ENOTDIR, "project is not a directory", os.fspath(project))
    ps = project_state(project)
    stale = stale_overlays(ps)
    found: leftovers.Look | None = None
    if not pending(ps):
        found = leftovers.look(ps, scan_tree=scan)
        if found.entry is None:
            if found.names:
                return Recovery(ps.project, problem=found.orphans(ps.project))
            if found.kept is not None:
                return Recovery(ps.project, problem=leftovers.missing(found.kept))
            found = None
        elif not adopt:
            return Recovery(ps.project, problem=found.advice(ps.project))
        if not stale and found is None:
            return None
    try:
        with locked(ps, timeout):
            if found is not None and found.entry is not None and not pending(ps):
                leftovers.adopt(found.entry, ps, timeout)
            try:
                action, n = _settle(ps)  # first: rolling forward may finish an upper layer among the stale
            except Unsettled as e:  # the overlays of dead processes can go all the same
                problem: OSError | None = e
                action, n = None, 0
            else:
                problem = None
            wait_disposals(ps.dir)
            stale = stale_overlays(ps)
            for d in stale:
                remove_tree(d)
    except OSError as e:
        return _problem(ps, e)
    if problem is not None:
        return _problem(ps, problem)
    if action is None and not stale:
        return None
    where = None
    if found is not None and found.journal is not None:
        where = f"it was started in {found.journal['lower']}; {found.why}"
    return Recovery(ps.project, action, n, len(stale), found=where)


def abandon_project(project: str | os.PathLike[str], *, timeout: float = LOCK_TIMEOUT) -> Recovery:
    """Forget a pending promotion of ``project`` without finishing or undoing it: the real tree stays as it
    is; our temp names that hold nothing else are removed, the others kept and listed
    (``speculate recover --abandon``; see :mod:`overlayfs.abandon`). Raises OSError when the journal itself
    cannot be cleared."""
    if not os.path.exists(project):
        raise FileNotFoundError(errno.ENOENT, "project directory does not exist", os.fspath(project))
    if not os.path.isdir(project):
        raise NotADirectoryError(errno.ENOTDIR, "project is not a directory", os.fspath(project))
    ps = project_state(project)
    if not pending(ps):
        found = leftovers.look(ps, scan_tree=True)
        if found.entry is not None:
            return Recovery(ps.project, problem=found.advice(ps.project))
        if found.names:
            return Recovery(ps.project, problem=found.orphans(ps.project))
        return Recovery(ps.project)
    with locked(ps, timeout):
        try:
            j = journal.read(ps.journal)
        except (ValueError, KeyError, TypeError):
            j = None
        if j is not None and (j["lower"] != str(ps.project) or leftovers.identity(ps.project) != j["root"]):
            return Recovery(ps.project, problem=leftovers.missing(ps))  # not this directory's to abandon
        message = abandon(ps, j)
        wait_disposals(ps.dir)
        stale = stale_overlays(ps)
        for d in stale:
            remove_tree(d)
    n = 0 if j is None else len(j["promoted"])
    return Recovery(ps.project, "abandoned", n, len(stale), message=message)


def recover_all(*, timeout: float = LOCK_TIMEOUT) -> list[Recovery]:
    """Recover every project in the state dir (what ``speculate bench`` runs first). A pending journal whose
    directory is missing or elsewhere is reported and kept, never deleted; the entry of a removed directory
    with nothing pending is forgotten. A project that cannot be recovered now is reported (a Recovery with
    ``problem``) and skipped."""
    out: list[Recovery] = []
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
        ps = ProjectState(project, base / key)
        try:
            if pending(ps) and ("." in key or not project.is_dir()):
                out.append(Recovery(project, problem=leftovers.missing(ps)))
            elif project.is_dir() and "." not in key:
                rec = recover_project(project, timeout=timeout)
                if rec is not None:
                    out.append(rec)
            else:
                # This process's own discarded overlays are deleted in the background under names that hold
                # its pid (alive): waited for, so that they do not keep the entry of a removed project.
                wait_disposals(base / key)
                if any(owner_alive(n) for n in _names(base / key / "overlays")):
                    continue
                with locked(ps, 0):  # nothing may become pending while it goes
                    if pending(ps):
                        continue
                    remove_tree(base / key)  # a removed temp project (e.g. a killed benchmark's copies)
        except OSError as e:
            out.append(
                Recovery(
                    project,
                    problem=f"could not recover it ({e.strerror or e}"
                    f"{f': {e.filename}' if e.filename else ''}); skipped",
                )
            )
    unique: list[Recovery] = []  # a journal set aside from a path is reported by both entries: once
    for rec in out:
        if all(rec.line() != u.line() for u in unique):
            unique.append(rec)
    return unique


def _names(d: Path) -> list[str]:
    try:
        return os.listdir(d)
    except FileNotFoundError:
        return []
