"""What a fork's overlay changes mean to the user, in words: which entries of the upper layer one command
touched, and a change list as files written, deleted and renamed (the approval question, the accepted line).

Attribution works on the upper layer's own entries: a snapshot (inode, mode, size, mtime per entry; not
ctime, which kernel overlayfs moves when it marks entries, whiteouts included, on the next mount) before a
command and one after; an entry that differs, or a whiteout or opaque marker that appeared,
is the command's. A change below a directory the command made or replaced (a new inode in the upper layer,
a whiteout) is the command's too; below a directory that was already there only the entries it touched.
"""

from __future__ import annotations

import filecmp
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from overlayfs.changes import Change
from overlayfs.layer import OPAQUE_FILE, WH_PREFIX

Entry = tuple[int, int, int, int]  # st_ino, st_mode, st_size, st_mtime_ns
Snapshot = dict[str, Entry]


def snapshot(upper: Path | str) -> Snapshot:
    """Every entry of the upper layer (links not followed). Its cost grows with the layer, not the project."""
    out: Snapshot = {}
    root = str(upper)
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        for name in (*dirnames, *filenames):
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except FileNotFoundError:
                continue
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            out[rel] = (st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns)
    return out


def _entry_name(rel: str) -> tuple[str, bool]:
    """The project path an upper entry stands for, and whether it replaces what was there (a whiteout in
    the ``.wh.`` form or an opaque marker)."""
    head, _, name = rel.rpartition("/")
    if name == OPAQUE_FILE:
        return head or ".", True
    if name.startswith(WH_PREFIX):
        return (f"{head}/" if head else "") + name[len(WH_PREFIX) :], True
    return rel, False


def touched(before: Snapshot, after: Snapshot) -> tuple[set[str], set[str]]:
    """The project paths whose upper entries a command changed, and among them those it made or replaced
    (everything below those is the command's)."""
    paths: set[str] = set()
    replaced: set[str] = set()
    for rel in before.keys() | after.keys():
        b, a = before.get(rel), after.get(rel)
        if b == a:
            continue
        path, marker = _entry_name(rel)
        paths.add(path)
        if marker or b is None or a is None or b[0] != a[0] or (b[1] ^ a[1]) & 0o170000 or not _is_dir(a):
            replaced.add(path)
    return paths, replaced


def _is_dir(e: Entry) -> bool:
    return e[1] & 0o170000 == 0o040000


def attribute(changes: Iterable[Change], paths: set[str], replaced: set[str]) -> list[Change]:
    """The changes a command made, given what it touched (:func:`touched`)."""

    def ours(c: Change) -> bool:
        if c.path in paths:
            return True
        parts = c.path.split("/")
        return any("/".join(parts[:k]) in replaced for k in range(1, len(parts)))

    return [c for c in changes if ours(c)]


@dataclass
class FileSummary:
    """A change list as a person reads it: files written (added or modified, links included), deleted
    (a deleted directory once, as ``dir/``) and renamed (``old -> new``, same content)."""

    written: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    renamed: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.written or self.deleted or self.renamed)

    def words(self, limit: int = 4) -> str:
        """``deleted build/; wrote a.py, b.py +2 more`` (or ``no change to the project``)."""
        parts = [
            f"{verb} "
            + ", ".join(items[:limit])
            + (f" +{len(items) - limit} more" if len(items) > limit else "")
            for verb, items in (("deleted", self.deleted), ("renamed", self.renamed), ("wrote", self.written))
            if items
        ]
        return "; ".join(parts) or "no change to the project"


def summarize(changes: Sequence[Change], pairs: Iterable[tuple[str, str]] = ()) -> FileSummary:
    """Group ``changes``; ``pairs`` (deleted, added) are renames (:func:`renames`)."""
    deleted = {c.path: c for c in changes if c.kind == "deleted"}
    paths = {c.path for c in changes}
    pairs = [(old, new) for old, new in pairs if old in paths and new in paths]
    taken = {p for pair in pairs for p in pair}
    tops = [p for p in sorted(deleted) if p not in taken and not _under_any(p, deleted)]
    return FileSummary(
        written=sorted(
            c.path for c in changes if c.kind != "deleted" and c.type != "dir" and c.path not in taken
        ),
        deleted=[p + "/" if deleted[p].type == "dir" else p for p in tops],
        renamed=[f"{old} -> {new}" for old, new in sorted(pairs)],
    )


def _under_any(path: str, deleted: dict[str, Change]) -> bool:
    parts = path.split("/")
    return any(
        deleted.get("/".join(parts[:k])) is not None and deleted["/".join(parts[:k])].type == "dir"
        for k in range(1, len(parts))
    )


def renames(changes: Sequence[Change], lower: Path | str, upper: Path | str) -> list[tuple[str, str]]:
    """(deleted, added) file pairs whose content is the same, each file in one pair at most: the deleted
    file as the real tree (``lower``) holds it, so call this before promotion; the added one in ``upper``.
    Only files of equal, non-zero size are compared."""
    by_size: dict[int, list[str]] = {}
    for c in changes:
        if c.kind == "added" and c.type == "file":
            size = _size(os.path.join(upper, c.path))
            if size:  # empty files are all alike: no rename told from them
                by_size.setdefault(size, []).append(c.path)
    pairs: list[tuple[str, str]] = []
    for old in sorted(c.path for c in changes if c.kind == "deleted" and c.type == "file"):
        a = os.path.join(lower, old)
        bucket = by_size.get(size, []) if (size := _size(a)) is not None else []
        new = next((n for n in bucket if _same(a, os.path.join(upper, n))), None)
        if new is not None:
            bucket.remove(new)
            pairs.append((old, new))
    return pairs


def _size(path: str) -> int | None:
    try:
        return os.lstat(path).st_size
    except OSError:
        return None


def _same(a: str, b: str) -> bool:
    try:
        return filecmp.cmp(a, b, shallow=False)
    except OSError:
        return False
