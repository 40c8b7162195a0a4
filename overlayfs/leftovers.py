"""Finding an interrupted promotion that its state entry no longer leads to, and saying so.

A promotion's journal is keyed by the project's path (:mod:`overlayfs.state`). When the project was moved or
renamed, its disk is not mounted, the state dir was deleted or belongs to another user, that key leads
nowhere, while the tree may hold half of an acceptance. Nothing here ever deletes a journal:

- ``scan(root)``: our ``*.ovl-tmp`` names under ``root``, by the token of the promotion that made them (each
  name carries it: ``.<name>.<token>.<i>.ovl-tmp``, ``b<i>`` for a backup, ``r<i>`` for a removed entry).
- ``look(ps, scan=...)``: the pending journal of another state entry that belongs to this directory (the
  same device and inode as its plan recorded, or its token's names are in the tree), else the names no
  state explains.
- ``adopt``: move that journal into this path's entry; :func:`belongs` and :func:`rehome` let the replay
  (``promote.settle``) rewrite the plan's path.
- ``set_aside``: an entry whose path now holds another directory (replaced, or the mount point of a disk
  that is not mounted) keeps its journal in ``projects/<key>.<token>/`` and frees the key for what is there.
"""

from __future__ import annotations

import json
import os
import pwd
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from overlayfs.copyup import fsync_dir, write_all
from overlayfs.journal import Journal, Unsettled, read
from overlayfs.state import ProjectState, ensure, locked, pending, remove_tree, state_root

NAME = re.compile(r"\.([0-9a-f]{12})\.[br]?\d+\.ovl-tmp$")
SHOWN = 5  # names listed in a message


def _n(k: int, what: str) -> str:
    return f"{k} {what}{'' if k == 1 else 's'}"


def identity(path: Path | str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino]


@dataclass
class Names:
    """The ``*.ovl-tmp`` names of one promotion found in a tree."""

    paths: list[str] = field(default_factory=list)  # relative to the project
    owners: set[int] = field(default_factory=set)


def scan(root: Path) -> dict[str, Names]:
    """Our temp names under ``root`` by token, those of promotions abandoned on purpose left out."""
    out: dict[str, Names] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            m = NAME.search(name)
            if m is None:
                continue
            p = os.path.join(dirpath, name)
            names = out.setdefault(m.group(1), Names())
            names.paths.append(os.path.relpath(p, root))
            try:
                names.owners.add(os.lstat(p).st_uid)
            except OSError:
                pass
    for token in list(out):
        if (abandoned_dir() / f"{token}.txt").exists():
            del out[token]
    return out


def abandoned_dir() -> Path:
    return state_root() / "abandoned"


def entries() -> list[ProjectState]:
    """Every state entry holding a pending journal (set-aside ones included)."""
    base = state_root() / "projects"
    try:
        keys = sorted(os.listdir(base))
    except FileNotFoundError:
        return []
    out = []
    for key in keys:
        try:
            project = Path(os.fsdecode((base / key / "project").read_bytes()))
        except OSError:
            continue
        ps = ProjectState(project, base / key)
        if pending(ps):
            out.append(ps)
    return out


def belongs(project: Path, j: Journal, names: dict[str, Names] | None = None) -> str | None:
    """Why journal ``j`` is this directory's (a phrase), or None."""
    if names is None:
        names = scan(project)
    if j.get("token") in names:
        return "its *.ovl-tmp names are in this tree"
    if identity(project) == j.get("root"):
        return "moved? this directory has the same device/inode"
    return None


@dataclass
class Look:
    entry: ProjectState | None = None  # another entry whose journal is this directory's
    journal: Journal | None = None
    why: str = ""
    names: dict[str, Names] = field(default_factory=dict)  # every token's names in the tree (scan only)
    kept: ProjectState | None = None  # a journal set aside from this path (another directory's)

    def advice(self, project: Path) -> str:
        """What the REPL and sessions say about a found journal (``speculate recover`` adopts it)."""
        assert self.entry is not None and self.journal is not None
        return (
            f"a pending acceptance of {_n(len(self.journal['promoted']), 'change')} into "
            f"{self.journal['lower']} was found for {project} ({self.why}); its state is in "
            f"{self.entry.dir}. Run `speculate recover {project}` to finish it here"
        )

    def orphans(self, project: Path) -> str:
        """What is said when the tree holds our names and no state of this user explains them."""
        paths = sorted(p for n in self.names.values() for p in n.paths)
        owners = set().union(*(n.owners for n in self.names.values()))
        shown = ", ".join(paths[:SHOWN]) + (f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else "")
        msg = (
            f"{project} holds {_n(len(paths), 'temporary name')} of an interrupted acceptance ({shown}) "
            f"and no state that could finish or undo it was found (looked in {state_root()}): the tree may "
            "be part old, part new"
        )
        others = sorted(u for u in owners if u != os.geteuid())
        if others:
            who = ", ".join(_user(u) for u in others)
            msg += (
                f". The names belong to {who}: that user's state dir may hold it; run "
                f"`speculate recover {project}` as that user"
            )
        else:
            msg += (
                ". If the state dir was deleted, nothing can finish it: names ending .b<N>.ovl-tmp hold "
                "the old versions of replaced files, .r<N>.ovl-tmp removed entries, the others new "
                "versions not moved in yet"
            )
        return msg


def _user(uid: int) -> str:
    try:
        pw = pwd.getpwuid(uid)
    except KeyError:
        return f"uid {uid}"
    return f"uid {uid} ({pw.pw_name}, state dir {pw.pw_dir}/.local/state/speculate unless set otherwise)"


def look(ps: ProjectState, *, scan_tree: bool) -> Look:
    """What another state entry, or the tree (``scan_tree``), says about ``ps.project`` (nothing pending
    in its own entry)."""
    names = scan(ps.project) if scan_tree else {}
    kept = None
    for e in entries():
        if e.dir == ps.dir:
            continue
        if e.project == ps.project:
            kept = e  # set aside from this path: reported unless it turns out to be this directory's
        try:
            j = read(e.journal)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if j is None or (not scan_tree and identity(ps.project) != j.get("root")):
            continue
        why = belongs(ps.project, j, names if scan_tree else {})
        if why is not None:
            return Look(e, j, why, names)
    return Look(names=names, kept=kept)


def adopt(src: ProjectState, dst: ProjectState, timeout: float) -> None:
    """Move ``src``'s pending journal into ``dst``'s entry (the caller holds ``dst``'s lock, and nothing is
    pending there); the replay rewrites its path (``promote.settle``)."""
    with locked(src, timeout):
        if not pending(src):
            return  # its promoter was alive and has finished (the same directory by two paths)
        ensure(dst)
        os.rename(src.journal, dst.journal)
        fsync_dir(str(dst.dir))
        fsync_dir(str(src.dir))
    if "." in src.dir.name:  # a set-aside entry: nothing else lives in it
        remove_tree(src.dir)


def rehome(path: Path, project: Path) -> None:
    """Rewrite the plan in journal ``path`` for the directory now at ``project`` (durably, atomically)."""
    plan, _, rest = path.read_bytes().partition(b"\n")
    j: dict[str, Any] = json.loads(plan)
    j["lower"] = str(project)
    j["root"] = identity(project)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        write_all(fd, (json.dumps(j) + "\n").encode() + rest)
        os.fdatasync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(str(path.parent))


class SetAside(Unsettled):
    """The journal of a project path belongs to another directory: kept in an entry of its own."""

    def __init__(self, message: str, project: str) -> None:
        self.project, self.state, self.problems = project, "set aside", []
        OSError.__init__(self, message)


def set_aside(ps: ProjectState, j: Journal) -> SetAside:
    """Move ``ps``'s journal (of a directory no longer at ``ps.project``) to an entry of its own."""
    dest = ps.dir.with_name(f"{ps.dir.name}.{j['token']}")
    dest.mkdir(mode=0o700, exist_ok=True)
    (dest / "project").write_bytes(os.fsencode(j["lower"]))
    root = j.get("root") or [0, 0]
    (dest / "identity").write_bytes(f"{root[0]} {root[1]}\n".encode())
    os.rename(ps.journal, dest / "promote.journal")
    fsync_dir(str(dest))
    fsync_dir(str(ps.dir))
    now = identity(ps.project)
    there = "nothing is there now" if now is None else f"it is now {now[0]}:{now[1]}"
    return SetAside(
        f"the pending acceptance of {_n(len(j['promoted']), 'change')} into {j['lower']} belongs to "
        f"another directory (device:inode {root[0]}:{root[1]}; {there}: replaced, or a disk that is not "
        f"mounted?); it is kept in {dest}. Run `speculate recover PATH` with that directory's path once "
        "it is back (found by its device/inode or its *.ovl-tmp names)",
        str(ps.project),
    )


def missing(ps: ProjectState) -> str:
    """What is said of a pending journal whose directory is missing, or elsewhere (``recover_all``)."""
    try:
        j = read(ps.journal)
    except (OSError, ValueError, KeyError, TypeError) as e:
        j, what = None, f"an unreadable acceptance journal ({e})"
    if j is not None:
        what = f"a pending acceptance of {_n(len(j['promoted']), 'change')} into {j['lower']}"
    where = "is missing" if not ps.project.is_dir() else "holds another directory"
    return (
        f"{what} is kept: {ps.project} {where} (moved, renamed, or on a disk that is not mounted?); its "
        f"state is in {ps.dir}. Run `speculate recover NEWPATH` with the directory's path now (found by "
        f"its device/inode or its *.ovl-tmp names), or `speculate recover {ps.project}` once the disk is "
        "mounted again"
    )
