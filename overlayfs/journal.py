"""The journaled write of a promotion plan into the real tree, and its replay after a crash.

A plan (built by :mod:`overlayfs.promote`) names every step; the journal is the plan plus a state, kept in the
project's state dir (:mod:`overlayfs.state`) so that any later process finds it from the project path alone.

- ``prepare``: make the new directories nothing is in the way of; stage every new file or link as a temp
  file beside its target (or in the nearest real directory); hard-link every file or link a put will
  replace to a backup name. The real tree's content is unchanged. Any error: roll back, nothing changed.
- ``commit`` (the commit point: one line appended to the journal and synced): move every removed entry
  aside to a trash name in its nearest surviving directory (deepest first), make the remaining
  directories, rename each temp file over its target (each file switches atomically), set the new
  directories' modes; then delete the trash and the backups. Any OSError here: the journal turns
  ``abort`` and every step is undone in reverse (backups renamed back, trash renamed back), so the tree
  is wholly old again.

Every step tells "done" from "to do" by what stands on disk, never by replaying blindly: a removal is done
when its trash name exists or the entry at the path is no longer the one planned (inode and kind: a put or
mkdir of another kind has filled it); a put is done when its temp file is gone. So replay after a crash at any
point, including during a replay, is safe. All our names end in ``.ovl-tmp``; none survive a recovery.
"""

from __future__ import annotations

import errno
import json
import os
import stat as stat_mod
from collections.abc import Callable
from pathlib import Path
from typing import Any

from overlayfs.copyup import copy_file, fsync_all, fsync_dir, run_all, stat_mode
from overlayfs.merged import kind_of, lstat_or_none

VERSION = 2
TEMP_SUFFIX = ".ovl-tmp"
Journal = dict[str, Any]


class PromoteError(OSError):
    """A promotion failed on one path and was rolled back: the real tree is as it was."""

    def __init__(self, cause: OSError, project: str, rel: str, phase: str) -> None:
        self.cause, self.project, self.rel, self.phase = cause, project, rel, phase
        where = "before" if phase == "prepare" else "after"
        super().__init__(cause.errno, f"{cause.strerror or cause}; promotion rolled back ({where} the commit "
                         "point), the real tree is unchanged", f"{project}/{rel}")


# The journal file holds the plan as one JSON line, then one line per later state ("commit", "abort").
# It is created once per project and kept; empty means nothing pending. Each write is one fdatasync: a
# torn plan line (no newline) cannot matter because nothing is staged before the plan is durable, and a
# torn state line is no state change because nothing is applied (or undone) before it is durable.


def begin(path: Path, j: Journal) -> None:
    """Write the plan of a promotion (state ``prepare``) durably."""
    data = (json.dumps({k: v for k, v in j.items() if k != "state"}) + "\n").encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
        new = False
    except FileNotFoundError:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        new = True
    try:
        os.ftruncate(fd, 0)
        _write_all(fd, data)
        os.fdatasync(fd)
    finally:
        os.close(fd)
    if new:
        fsync_dir(str(path.parent))


def mark(path: Path, state: str) -> None:
    """Append a state change (``commit``: the commit point; ``abort``) durably."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    try:
        _write_all(fd, f"{state}\n".encode())
        os.fdatasync(fd)
    finally:
        os.close(fd)


def clear(path: Path) -> None:
    """Nothing pending any more. Not synced: should a power loss undo it, the replay is idempotent."""
    os.truncate(path, 0)


def read(path: Path) -> Journal | None:
    """The pending plan with its current ``state``; None when nothing is pending (or the plan is torn)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    plan, nl, rest = data.partition(b"\n")
    if not nl:
        return None
    j: Journal = json.loads(plan)
    if j.get("version") != VERSION:
        raise ValueError(f"{path}: promotion journal of version {j.get('version')!r}, this code reads {VERSION}")
    j["state"] = "prepare"
    for line in rest.split(b"\n")[:-1]:  # complete lines only
        if line in (b"commit", b"abort"):
            j["state"] = line.decode()
    return j


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class _Steps:
    """The steps of one journal; ``at`` is the project path being worked on, for error messages."""

    def __init__(self, j: Journal) -> None:
        self.j = j
        self.lower: str = j["lower"]
        self.at = "."

    def p(self, rel: str) -> str:
        return f"{self.lower}/{rel}"

    def prepare(self) -> None:
        durable = self.j["durable"]
        dirs = set()  # whose entries changed
        for rel in self.j["pre"]:
            self.at = rel
            os.mkdir(self.p(rel), 0o700)  # its mode is set after the puts below it have landed
            dirs.add(os.path.dirname(self.p(rel)))
        copies: dict[str, tuple[str, str, bool]] = {}
        for rel, stage, backup in self.j["puts"]:
            self.at = rel
            src, dst = f"{self.j['upper']}/{rel}", self.p(stage)
            if stat_mod.S_ISLNK(os.lstat(src).st_mode):
                os.symlink(os.readlink(src), dst)
            else:
                copies[rel] = (src, dst, durable)
            if backup is not None:
                _backup(self.p(rel), self.p(backup))
            dirs.add(os.path.dirname(dst))
        # The file copies run concurrently, each fsync'd by its own thread (one journal commit for many).
        for rel, err in zip(copies, run_all(_stage, list(copies.values())), strict=True):
            if err is not None:
                self.at = rel
                raise err
        if durable:
            self.at = "."
            fsync_all(dirs)

    def rollback(self) -> None:
        """Undo prepare: temp files, backups (links to entries still in place) and early directories."""
        for _, stage, backup in self.j["puts"]:
            _unlink_if(self.p(stage))
            if backup is not None:
                _unlink_if(self.p(backup))
        for rel in reversed(self.j["pre"]):
            try:
                os.rmdir(self.p(rel))
            except (FileNotFoundError, NotADirectoryError):
                pass

    def apply(self) -> None:
        """Roll forward from the commit point (idempotent)."""
        dirs = set()
        for rel, kind, trash, ino in self.j["rms"]:  # deepest first
            self.at = rel
            st = lstat_or_none(self.p(rel))
            if st is not None and (st.st_ino, kind_of(st.st_mode)) == (ino, kind) and not os.path.lexists(
                    self.p(trash)):
                os.rename(self.p(rel), self.p(trash))
                dirs.add(os.path.dirname(self.p(trash)))  # the parent it left is itself removed, or this
        pre = set(self.j["pre"])
        for rel, _ in self.j["mkdirs"]:  # shallowest first
            self.at = rel
            st = lstat_or_none(self.p(rel))
            if rel not in pre and not (st is not None and stat_mod.S_ISDIR(st.st_mode)):
                os.mkdir(self.p(rel), 0o700)
        for rel, stage, _ in self.j["puts"]:
            self.at = rel
            if os.path.lexists(self.p(stage)):
                os.replace(self.p(stage), self.p(rel))
            dirs.add(os.path.dirname(self.p(rel)))
        for rel, mode in reversed(self.j["mkdirs"]):
            self.at = rel
            os.chmod(self.p(rel), mode)
            dirs.add(os.path.dirname(self.p(rel)))
        if self.j["durable"]:
            self.at = "."
            fsync_all(dirs)

    def finish(self) -> None:
        """After apply: delete the backups and the trash (what the promotion replaced or removed)."""
        for _, _, backup in self.j["puts"]:
            if backup is not None:
                _unlink_if(self.p(backup))
        for rel, _, trash, _ in self.j["rms"]:
            t = self.p(trash)
            st = lstat_or_none(t)
            if st is None:
                continue
            if not stat_mod.S_ISDIR(st.st_mode):
                os.unlink(t)
                continue
            try:
                os.rmdir(t)
            except OSError as e:
                if e.errno != errno.ENOTEMPTY:
                    raise
                # Something was created in it after the conflict check: give it back rather than delete it.
                if not os.path.lexists(self.p(rel)):
                    os.rename(t, self.p(rel))
                else:
                    from overlayfs.state import remove_tree

                    remove_tree(Path(t))

    def undo(self) -> None:
        """Reverse apply after an error (idempotent): puts, then new directories, then removals."""
        for rel, _ in self.j["mkdirs"]:  # ours; a read-only mode set by apply would block the unlinks below
            st = lstat_or_none(self.p(rel))
            if st is not None and stat_mod.S_ISDIR(st.st_mode):
                os.chmod(self.p(rel), 0o700)
        for rel, stage, backup in reversed(self.j["puts"]):
            self.at = rel
            if os.path.lexists(self.p(stage)):
                continue  # never landed
            if backup is not None:
                if os.path.lexists(self.p(backup)):
                    os.replace(self.p(backup), self.p(rel))
            else:  # nothing stood there, or a directory (moved aside): remove what we put
                st = lstat_or_none(self.p(rel))
                if st is not None and not stat_mod.S_ISDIR(st.st_mode):
                    os.unlink(self.p(rel))
        pre = set(self.j["pre"])
        for rel, _ in reversed(self.j["mkdirs"]):
            self.at = rel
            st = lstat_or_none(self.p(rel))
            if rel not in pre and st is not None and stat_mod.S_ISDIR(st.st_mode):
                os.rmdir(self.p(rel))  # ours: only a non-directory or nothing stood here before
        for rel, _, trash, _ in reversed(self.j["rms"]):  # shallowest first: parents come back first
            self.at = rel
            if os.path.lexists(self.p(trash)):
                os.rename(self.p(trash), self.p(rel))
        self.rollback()


def _stage(src: str, dst: str, durable: bool) -> None:
    copy_file(src, dst, mode=stat_mode(os.lstat(src).st_mode), fsync=durable)


def _unlink_if(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _backup(src: str, dst: str) -> None:
    """Keep the entry a put replaces under a second name: a hard link, or a copy where links fail."""
    try:
        os.link(src, dst, follow_symlinks=False)
        return
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK, errno.EXDEV, errno.ENOSYS):
            raise
    st = os.lstat(src)
    if stat_mod.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(src), dst)
    else:
        copy_file(src, dst, times_ns=(st.st_atime_ns, st.st_mtime_ns))


def execute(path: Path, j: Journal, finalize: Callable[[Journal], None]) -> None:
    """Run a plan: prepare, commit point, apply, finish, ``finalize`` (the upper layer). Raises
    PromoteError after rolling back on an OSError; anything else (a crash) leaves the journal to recovery."""
    s = _Steps(j)
    begin(path, j)
    try:
        s.prepare()
    except Exception as e:
        s.rollback()
        clear(path)
        if isinstance(e, OSError):
            raise PromoteError(e, s.lower, s.at, "prepare") from e
        raise
    mark(path, "commit")  # the commit point
    _forward(path, s, finalize)


def _forward(path: Path, s: _Steps, finalize: Callable[[Journal], None]) -> None:
    try:
        s.apply()
    except OSError as e:
        mark(path, "abort")
        s.undo()
        clear(path)
        raise PromoteError(e, s.lower, s.at, "commit") from e
    s.finish()
    finalize(s.j)
    clear(path)


def resume(path: Path, j: Journal, finalize: Callable[[Journal], None]) -> str:
    """Finish or undo the promotion journal ``j`` of a dead process; returns what was done."""
    s = _Steps(j)
    if j["state"] == "commit":
        try:
            _forward(path, s, finalize)
        except PromoteError as e:
            return f"rolled back ({e.strerror} at {e.rel})"
        return "rolled forward"
    if j["state"] == "abort":
        s.undo()
    else:
        s.rollback()
    clear(path)
    return "rolled back"
