"""What an upper layer changes in the real tree: :class:`Change` records and a git-style unified diff.

Computed from disk by walking the upper layer only (cost grows with the changes, not the project), except
under a directory that replaced a lower one (opaque, or over a non-directory), where the lower subtree is
listed too because every entry of it is deleted or replaced. A path the host cannot name (a tree made
deeper than PATH_MAX inside the sandbox) is a boundary: :class:`~overlayfs.errors.HostPathTooLong`.
"""

from __future__ import annotations

import difflib
import errno
import os
import stat as stat_mod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from overlayfs.errors import HostPathTooLong
from overlayfs.layer import is_opaque, is_whiteout_at
from overlayfs.merged import join, kind_of, lstat_or_none
from overlayfs.walk import PATH_MAX, too_long

DIFF_LIMIT = 1 << 20  # larger files are summarised, not diffed line by line


@dataclass(frozen=True, order=True)
class Change:
    """One path whose merged-view entry differs from the real tree.

    ``kind``: "added" (absent in the real tree), "deleted" (absent in the view) or "modified" (content,
    mode, link target or type differs). ``type``: what the view holds ("file", "dir", "symlink"), or for a
    deletion what the real tree holds.
    """

    path: str
    kind: str
    type: str = "file"


def _same_file(a: str, b: str) -> bool:
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 16), fb.read(1 << 16)
            if x != y:
                return False
            if not x:
                return True


# The scan is iterative (a tree a thousand directories deep passed Python's recursion limit): each step below
# appends to ``out`` and pushes the steps for what lies beneath onto ``todo``; the result is sorted at the end.
Todo = list[tuple[Callable[..., None], tuple[Any, ...]]]


def _under(path: str, name: str, rel: str) -> str:
    """``path/name``; HostPathTooLong where the host cannot name it (the change could not be read, shown or
    promoted: a boundary, not a crash)."""
    child = f"{path}/{name}"
    if too_long(child):
        raise HostPathTooLong(
            errno.ENAMETOOLONG,
            f"the overlay holds a path deeper than the host can name (PATH_MAX {PATH_MAX} bytes): "
            f"{rel[:120]}... ({len(os.fsencode(rel))} bytes); it can be neither shown nor promoted",
        )
    return child


def _deleted(rel: str, lpath: str, lst: os.stat_result | None, out: list[Change], todo: Todo) -> None:
    """Every entry of the real tree at and under ``rel`` is deleted."""
    if lst is None:
        return
    kind = kind_of(lst.st_mode)
    if kind == "dir":
        _deleted_children(rel, lpath, out, todo)
    out.append(Change(rel, "deleted", kind))


def _entry(
    rel: str,
    upath: str,
    ust: os.stat_result,
    lpath: str | None,
    lst: os.stat_result | None,
    out: list[Change],
    todo: Todo,
) -> None:
    """Compare upper entry ``upath`` with the real entry (``lst`` None: absent or hidden)."""
    ukind = kind_of(ust.st_mode)
    if lst is None or lpath is None:  # nothing real there (lst is None whenever lpath is)
        if ukind == "dir":
            _replaced_dir(rel, upath, ust, lpath, lst, out, todo)
        else:
            out.append(Change(rel, "added", ukind))
        return
    if ukind == "dir":
        if stat_mod.S_ISDIR(lst.st_mode) and not is_opaque(upath):
            todo.append((_merged_dir, (rel, upath, lpath)))
        else:
            _replaced_dir(rel, upath, ust, lpath, lst, out, todo)
        return
    lkind = kind_of(lst.st_mode)
    if lkind == "dir":
        _deleted_children(rel, lpath, out, todo)
        out.append(Change(rel, "modified", ukind))
    elif lkind != ukind:
        out.append(Change(rel, "modified", ukind))
    elif ukind == "symlink":
        if os.readlink(upath) != os.readlink(lpath):
            out.append(Change(rel, "modified", ukind))
    elif (
        ust.st_size != lst.st_size
        or stat_mod.S_IMODE(ust.st_mode) != stat_mod.S_IMODE(lst.st_mode)
        or not _same_file(upath, lpath)
    ):
        out.append(Change(rel, "modified", ukind))


def _deleted_children(rel: str, lpath: str, out: list[Change], todo: Todo) -> None:
    with os.scandir(lpath) as it:
        names = [e.name for e in it]
    for name in names:
        child = _under(lpath, name, join(rel, name))
        todo.append((_deleted, (join(rel, name), child, lstat_or_none(child))))


def _upper_children(rel: str, upath: str) -> tuple[dict[str, os.stat_result], set[str]]:
    """Real entries of an upper directory, and the names whited out in it."""
    present: dict[str, os.stat_result] = {}
    whiteouts: set[str] = set()
    with os.scandir(upath) as it:
        for e in it:
            _under(upath, e.name, join(rel, e.name))
            st = e.stat(follow_symlinks=False)
            if is_whiteout_at(e.path, st):
                whiteouts.add(e.name)
            else:
                present[e.name] = st
    return present, whiteouts - set(present)


def _merged_dir(rel: str, upath: str, lpath: str, out: list[Change], todo: Todo) -> None:
    """An upper directory merged over a real one: only what the upper layer holds can differ."""
    present, whiteouts = _upper_children(rel, upath)
    for name in whiteouts:
        lp = _under(lpath, name, join(rel, name))
        todo.append((_deleted, (join(rel, name), lp, lstat_or_none(lp))))
    for name, st in present.items():
        lp = _under(lpath, name, join(rel, name))
        up = _under(upath, name, join(rel, name))
        todo.append((_entry, (join(rel, name), up, st, lp, lstat_or_none(lp))))


def _replaced_dir(
    rel: str,
    upath: str,
    ust: os.stat_result,
    lpath: str | None,
    lst: os.stat_result | None,
    out: list[Change],
    todo: Todo,
) -> None:
    """An upper directory hiding whatever the real tree has: compare the whole subtrees."""
    real_dir = lst is not None and stat_mod.S_ISDIR(lst.st_mode)
    if lst is None:
        out.append(Change(rel, "added", "dir"))
    elif not real_dir:
        out.append(Change(rel, "modified", "dir"))
    present, _ = _upper_children(rel, upath)
    if real_dir:
        assert lpath is not None
        with os.scandir(lpath) as it:
            for e in it:
                if e.name not in present:
                    gone = _under(lpath, e.name, join(rel, e.name))
                    todo.append((_deleted, (join(rel, e.name), gone, lstat_or_none(gone))))
    for name, st in present.items():
        child = _under(upath, name, join(rel, name))
        lp = _under(lpath, name, join(rel, name)) if real_dir and lpath is not None else None
        clst = lstat_or_none(lp) if lp is not None else None
        if stat_mod.S_ISDIR(st.st_mode):  # hidden below an opaque dir too
            todo.append((_replaced_dir, (join(rel, name), child, st, lp, clst)))
        else:
            todo.append((_entry, (join(rel, name), child, st, lp, clst)))


def compute_changes(lower: str, upper: str) -> list[Change]:
    """The changes, sorted. Raises HostPathTooLong where the upper layer holds a path the host cannot name."""
    out: list[Change] = []
    todo: Todo = [(_merged_dir, (".", upper, lower))]
    while todo:
        step, args = todo.pop()
        step(*args, out, todo)
    return sorted(out)


# -- diff ---------------------------------------------------------------------------------------------


def _content(path: str, kind: str) -> bytes | None:
    if kind == "symlink":
        return os.fsencode(os.readlink(path))
    if os.path.getsize(path) > DIFF_LIMIT:
        return None
    with open(path, "rb") as f:
        return f.read()


def _mode_of(path: str) -> str:
    st = os.lstat(path)
    if stat_mod.S_ISLNK(st.st_mode):
        return "120000"
    return f"{stat_mod.S_IFREG | stat_mod.S_IMODE(st.st_mode):o}"  # the real mode, not git's 644/755 only


Reader = Callable[[str, str], "bytes | None"]  # (path, kind) -> content, None: too large to show
Differ = Callable[[list[str], list[str], str, str], Iterable[str]]  # difflib.unified_diff's shape


def file_diff(
    lower: str, upper: str, ch: Change, *, read: Reader = _content, differ: Differ = difflib.unified_diff
) -> list[str]:
    """One change as ``git diff`` shows it. ``read`` and ``differ`` may be bounded versions (the acceptance
    diff's, :mod:`speculate.speculation.diffcap`): the layout stays this one."""
    a, b = f"a/{ch.path}", f"b/{ch.path}"
    lp, up = f"{lower}/{ch.path}", f"{upper}/{ch.path}"
    head = [f"diff --git {a} {b}"]
    old_kind = (
        ch.type if ch.kind == "deleted" else (kind_of(os.lstat(lp).st_mode) if ch.kind == "modified" else "")
    )
    old = read(lp, old_kind) if old_kind in ("file", "symlink") else b""
    new = read(up, ch.type) if ch.kind != "deleted" else b""
    if ch.kind == "added":
        head.append(f"new file mode {_mode_of(up)}")
    elif ch.kind == "deleted":
        head.append(f"deleted file mode {_mode_of(lp)}")
    elif old_kind in ("file", "symlink") and _mode_of(lp) != _mode_of(up):
        head += [f"old mode {_mode_of(lp)}", f"new mode {_mode_of(up)}"]
    if old is None or new is None:
        return [*head, f"Binary files {a} and {b} differ (larger than {DIFF_LIMIT} bytes)"]
    if old == new:
        return head
    try:
        old_t, new_t = old.decode("utf-8"), new.decode("utf-8")
    except UnicodeDecodeError:
        return [*head, f"Binary files {a} and {b} differ"]
    body = differ(
        old_t.splitlines(keepends=True),
        new_t.splitlines(keepends=True),
        "/dev/null" if ch.kind == "added" else a,
        "/dev/null" if ch.kind == "deleted" else b,
    )
    lines = [ln if ln.endswith("\n") else ln + "\n\\ No newline at end of file\n" for ln in body]
    return [*head, "".join(lines).rstrip("\n")]


def unified_diff(lower: str, upper: str, changes: list[Change]) -> str:
    """Git-style unified diff of the file and symlink changes (directories show through their files)."""
    parts: list[str] = []
    for ch in changes:
        if ch.type in ("file", "symlink"):
            parts.extend(file_diff(lower, upper, ch))
    return "\n".join(parts) + ("\n" if parts else "")
