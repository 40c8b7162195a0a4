"""The journaled write of a promotion plan into the real tree, its replay after a crash, and what is said when
neither can finish.

A plan (built by :mod:`overlayfs.promote`) names every step; the journal is the plan plus a state, kept in the
project's state dir (:mod:`overlayfs.state`) so that any later process finds it from the project path alone.
The steps themselves are in :mod:`overlayfs.steps`.

- ``prepare``: make the new directories nothing is in the way of; stage every new file or link as a temp
  file beside its target (or in the nearest real directory); hard-link every file or link a put will
  replace to a backup name. The real tree's content is unchanged. Any error: roll back, nothing changed.
- ``commit`` (the commit point: one line appended to the journal and synced, carrying what prepare measured):
  move every removed entry aside to a trash name in its nearest surviving directory (deepest first), make
  the remaining directories, rename each temp file over its target (each file switches atomically), set the
  new directories' modes; then delete the trash and the backups. Any OSError, or a target the user changed
  (:class:`overlayfs.steps.Changed`): the journal turns ``abort`` and every step is undone in reverse
  (backups renamed back, trash renamed back), so the tree is wholly old again.

All our names end in ``.ovl-tmp``; none survive a recovery. When a journal can be neither finished nor
undone (a read-only filesystem, a state dir that cannot be written), :class:`Unsettled` says so once, with
what to do: ``speculate recover PROJECT`` once the cause is gone, or ``speculate recover --abandon PROJECT``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from overlayfs.copyup import fsync_dir, write_all
from overlayfs.errors import OverlayError
from overlayfs.stamps import Changed
from overlayfs.state import remove_later
from overlayfs.steps import Steps

VERSION = 3
TEMP_SUFFIX = ".ovl-tmp"
Journal = dict[str, Any]


class PromoteError(OverlayError, OSError):
    """A promotion failed on one path and was rolled back: the real tree is as it was."""

    def __init__(
        self, cause: OSError, project: str, rel: str, phase: str, *, file: str | None = None, note: str = ""
    ) -> None:
        self.cause, self.project, self.rel, self.phase = cause, project, rel, phase
        where = "before" if phase == "prepare" else "after"
        super().__init__(
            cause.errno,
            f"{cause.strerror or cause}; promotion rolled back ({where} the commit "
            f"point), the real tree is unchanged{note}",
            file or f"{project}/{rel}",
        )


class Unsettled(OverlayError, OSError):
    """A promotion (or its recovery) could be neither finished nor undone: the journal stays pending and the
    message says what the real tree holds and what to do."""

    def __init__(self, project: str, changes: int, state: str, cause: str, problems: list[str]) -> None:
        self.project, self.state, self.problems = project, state, problems
        if state == "unreadable":
            super().__init__(
                f"the acceptance journal of {project} cannot be read ({cause}); what it did to "
                f"the real tree is unknown. Run `speculate recover --abandon {project}` to forget "
                "it and keep the tree as it is"
            )
            return
        tree = (
            "is unchanged apart from temporary *.ovl-tmp names (and new, empty directories)"
            if state == "prepare"
            else "holds the whole acceptance apart from temporary *.ovl-tmp names"
            if state == "finish"
            else "may hold part of the acceptance"
        )
        left = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
        super().__init__(
            f"an acceptance of {changes} change{'' if changes == 1 else 's'} into {project} could not be "
            f"{'finished' if state in ('commit', 'finish') else 'undone'}: {cause}"
            + (f" ({left})" if left else "")
            + f". The real tree {tree}. Run `speculate recover {project}` "
            f"once that is fixed, or `speculate recover --abandon {project}` to keep the tree as it is"
        )


@dataclass
class Outcome:
    """What a promotion did: ``changed`` names an entry the user changed at the commit point (then nothing
    landed); ``notes`` what was left to clean up after the whole acceptance landed."""

    changed: Changed | None = None
    notes: list[str] = field(default_factory=list)
    pending: bool = False  # the journal was kept: its replay finishes the cleanup once it can


# The journal file holds the plan as one JSON line, then one line per later state ("commit" followed by
# what prepare measured, "abort"). It is created once per project and kept; empty means nothing pending.
# Each write is one fdatasync: a torn plan line (no newline) cannot matter because nothing is staged before
# the plan is durable, and a torn state line is no state change because nothing is applied (or undone)
# before it is durable.


def begin(path: Path, j: Journal) -> None:
    """Write the plan of a promotion (state ``prepare``) durably."""
    data = (json.dumps({k: v for k, v in j.items() if k not in ("state", "commit")}) + "\n").encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
        new = False
    except FileNotFoundError:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        new = True
    try:
        os.ftruncate(fd, 0)
        write_all(fd, data)
        os.fdatasync(fd)
    finally:
        os.close(fd)
    if new:
        fsync_dir(str(path.parent))


def mark(
    path: Path, state: str, data: dict[str, Any] | list[int] | None = None, *, sync: bool = True
) -> None:
    """Append a state change (``commit``: the commit point, with what prepare measured; ``abort``;
    ``finish``: everything landed, the backups and trash may go) durably unless ``sync`` is False; or
    ``writing [i, ...]``: those puts are about to be written in place (overlayfs.inplace), not a state change."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    try:
        write_all(fd, (state + ("" if data is None else " " + json.dumps(data)) + "\n").encode())
        if sync:
            os.fdatasync(fd)
    finally:
        os.close(fd)


def clear(path: Path) -> None:
    """Nothing pending any more. Not synced: should a power loss undo it, the replay is idempotent."""
    os.truncate(path, 0)


def read(path: Path) -> Journal | None:
    """The pending plan with its current ``state``; None when nothing is pending (or the plan is torn).
    Raises ValueError for a journal this code cannot read."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    plan, nl, rest = data.partition(b"\n")
    if not nl:
        return None
    j: Journal = json.loads(plan)
    if j.get("version") not in (2, VERSION):
        raise ValueError(
            f"{path}: promotion journal of version {j.get('version')!r}, this code reads {VERSION}"
        )
    if j["version"] == 2:  # no modes, no stamps: replayed without the identity checks
        j["puts"] = [[*p, None, None] for p in j["puts"]]
        j["rms"] = [[*r, None] for r in j["rms"]]
    j["state"] = "prepare"
    for line in rest.split(b"\n")[:-1]:  # complete lines only
        word, _, more = line.partition(b" ")
        if word in (b"commit", b"abort", b"finish"):
            j["state"] = word.decode()
        if word == b"commit" and more:
            j["commit"] = json.loads(more)
        if word == b"writing" and more:
            j.setdefault("writing", []).extend(json.loads(more))
        if word == b"abort" and more:
            j["restore"] = json.loads(more)["written"]
    return j


def _steps(path: Path, j: Journal) -> Steps:
    s = Steps(j)

    def record(todo: list[int]) -> None:  # before any is touched, durably if the promotion is
        mark(path, "writing", todo, sync=bool(j["durable"]))

    s.record = record
    return s


def _changes(j: Journal) -> int:
    return len(j["promoted"])


def _try_clear(path: Path, s: Steps) -> str:
    """Clear the journal; '' or why it could not be (it then stays pending: its replay is harmless)."""
    try:
        clear(path)
        return ""
    except OSError as e:
        return f"; the journal {path} could not be cleared ({e.strerror}): `speculate recover` clears it"


def execute(path: Path, j: Journal, finalize: Callable[[Journal], None]) -> Outcome:
    """Run a plan: prepare, commit point, apply, finish, ``finalize`` (the upper layer).

    Raises PromoteError after rolling back on an OSError, Unsettled when not even that could be done; a
    target changed by the user under the promotion comes back as ``Outcome.changed`` (rolled back too).
    Anything else (a crash) leaves the journal to recovery."""
    s = _steps(path, j)
    try:
        begin(path, j)
    except OSError as e:
        raise PromoteError(
            e, s.lower, ".", "prepare", file=str(path), note=" (the acceptance journal could not be written)"
        ) from e
    try:
        measured = s.prepare()
    except Exception as e:
        cause = _cause(e, s)
        s.rollback()
        if s.problems:
            raise Unsettled(s.lower, _changes(j), "prepare", cause, s.problems) from e
        note = _try_clear(path, s)
        if isinstance(e, Changed):
            return Outcome(e)
        if isinstance(e, OSError):
            raise PromoteError(e, s.lower, s.at, "prepare", note=note) from e
        raise
    try:
        mark(path, "commit", measured)  # the commit point
    except OSError as e:
        s.rollback()
        if s.problems:
            raise Unsettled(s.lower, _changes(j), "prepare", _cause(e, s, path), s.problems) from e
        raise PromoteError(
            e,
            s.lower,
            ".",
            "prepare",
            file=str(path),
            note=" (the acceptance journal could not be written)" + _try_clear(path, s),
        ) from e
    j["commit"] = measured
    return _forward(path, s, finalize, aside=True)


def _cause(e: BaseException, s: Steps, file: Path | None = None) -> str:
    if isinstance(e, Changed):
        return f"{s.lower}/{e.rel} was {e.reason}"
    if isinstance(e, OSError):
        return f"{e.strerror or e} at {file or f'{s.lower}/{s.at}'}"
    return str(e)


def _aside(j: Journal) -> str | None:
    """A new directory in the overlay's ``meta/tmp`` for the spent backups and trash when that is on the
    project's filesystem (a rename into it is O(1)); None: they are deleted in place."""
    if not j["rms"] and not any(put[2] for put in j["puts"]):
        return None  # nothing was replaced or removed
    tmp = f"{j['metadir']}/tmp"
    try:
        if os.stat(tmp).st_dev != os.stat(j["lower"]).st_dev:
            return None
        os.mkdir(aside := f"{tmp}/finished-{j['token']}", 0o700)
    except OSError:
        return None
    return aside


def _forward(path: Path, s: Steps, finalize: Callable[[Journal], None], *, aside: bool = False) -> Outcome:
    if s.j["state"] != "finish":  # a replay after finish began must not apply (or undo) again: backups go
        try:
            s.apply()
        except (OSError, Changed) as e:
            cause, at = _cause(e, s), s.at
            try:
                mark(path, "abort", s.abort_record())
            except OSError as m:  # undoing without a record would let a replay roll forward over the undo
                raise Unsettled(
                    s.lower,
                    _changes(s.j),
                    "commit",
                    f"{cause}; then the journal could not record the abort ({m.strerror} at {path})",
                    [],
                ) from e
            s.undo()
            if s.problems:
                raise Unsettled(s.lower, _changes(s.j), "abort", cause, s.problems) from e
            note = _try_clear(path, s)
            if isinstance(e, Changed):
                return Outcome(e)
            raise PromoteError(e, s.lower, at, "commit", note=note) from e
        try:  # not synced: a power loss that drops it leaves a replay of apply, which changes nothing
            mark(path, "finish", sync=False)
        except OSError:
            pass  # a journal that cannot be written: its replay re-applies (a no-op), then finishes
    # The live promotion moves what it replaced or removed aside and deletes it on a thread; a replay after
    # a crash deletes in place (the dead process's overlay, where the aside dir would be, is swept anyway).
    spent = _aside(s.j) if aside else None
    s.finish(spent)
    if spent is not None:
        remove_later(Path(spent))
    notes = list(s.problems)
    try:
        finalize(s.j)
    except OSError as e:  # the real tree is complete; the overlay's own layer could not be tidied
        notes.append(f"could not clear the accepted changes from the overlay's upper layer: {e}")
    if s.problems:  # keep the journal: its replay removes what is left once that can be done
        return Outcome(None, notes, pending=True)
    note = _try_clear(path, s)
    return Outcome(None, notes + ([note.removeprefix("; ")] if note else []), pending=bool(note))


def resume(path: Path, j: Journal, finalize: Callable[[Journal], None]) -> str:
    """Finish or undo the promotion journal ``j`` of a dead process; returns what was done, raises Unsettled
    when it cannot be done now."""
    s = _steps(path, j)
    if j["state"] in ("commit", "finish"):
        try:
            out = _forward(path, s, finalize)
        except PromoteError as e:
            return f"rolled back ({e.strerror} at {e.rel})"
        if out.changed is not None:
            return f"rolled back ({out.changed.rel} was {out.changed.reason})"
        if out.pending:
            raise Unsettled(s.lower, _changes(j), "finish", "its cleanup could not be finished", out.notes)
        return "rolled forward"
    if j["state"] == "abort":
        s.undo()
    else:
        s.rollback()
    if s.problems:
        raise Unsettled(s.lower, _changes(j), j["state"], "what it left could not be removed", s.problems)
    try:
        clear(path)
    except OSError as e:
        raise Unsettled(
            s.lower,
            _changes(j),
            "prepare",
            f"the journal {path} could not be cleared ({e.strerror}) after rolling back",
            [],
        ) from e
    return "rolled back"


def abandon(path: Path, j: Journal | None) -> list[str]:
    """Forget journal ``j`` and keep the real tree as it is, removing our temp names where possible (an
    interrupted prepare is rolled back: nothing of it had landed). Returns what could not be removed."""
    problems: list[str] = []
    if j is not None:
        s = Steps(j)
        if j["state"] == "prepare":
            s.rollback()
        else:
            s.abandon()
        problems = s.problems
    clear(path)
    return problems
