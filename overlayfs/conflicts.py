"""The conflict check of a promotion: what the user changed in the real tree since the overlay read or changed
it, and which changes depend on a conflicting path.

A read record of kind ``watch`` stands for the whole project, watched for changes since the speculation's
first command (:mod:`overlayfs.treewatch`, :func:`overlayfs.kernel.record_session`): each change it saw
is a conflict, and so is a watch that lost events or is gone. The check's cost grows with the paths
changed and read, not with the project.

The check also returns the stamp (:func:`overlayfs.steps.stamp`) of every path it looked at, taken before
its identity was compared: promotion compares each entry with that stamp again right before replacing or
removing it, so an edit made after the check is caught too (see :mod:`overlayfs.steps`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from overlayfs import treewatch
from overlayfs.changes import Change
from overlayfs.layer import Identity, listing_digest
from overlayfs.merged import lstat_or_none
from overlayfs.stamps import Stamp, stamp


@dataclass(frozen=True)
class Conflict:
    """A path whose real-tree state no longer matches what the speculation saw or changed, or one that
    acceptance never lands (see :mod:`overlayfs.policy`)."""

    path: str
    reason: str


def _same(base: Identity, now: Identity) -> bool:
    if base.exists and now.exists and base.kind == now.kind == "dir":
        return True  # a directory's own mtime/size move with its entries; those are checked one by one
    return base.matches(now)


def _why(base: Identity, now: Identity) -> str:
    if not base.exists:
        return "created in the real tree"
    if not now.exists:
        return "deleted in the real tree"
    return "changed in the real tree"


def find_conflicts(
    lower: Path, paths: set[str], bases: dict[str, Identity], reads: dict[str, Identity]
) -> tuple[list[Conflict], dict[str, Stamp | None]]:
    """Check ``paths`` (changed ones, and every path whose base was recorded) and the read set; returns the
    conflicts and the stamp of each of ``paths`` as the check saw it (None: absent)."""
    out: dict[str, Conflict] = {}
    seen: dict[str, Stamp | None] = {}
    for path in sorted(paths):
        st = lstat_or_none(f"{lower}/{path}")  # first: an edit after it moves the stamp or the hash
        seen[path] = None if st is None else stamp(st)
        now = Identity.of(lower, path)
        base = bases.get(path)
        if base is None:
            if now.exists:  # changed by a writer that recorded no base: assume the worst
                out[path] = Conflict(path, "exists in the real tree and no base was recorded for it")
        elif not _same(base, now):
            out[path] = Conflict(path, f"{_why(base, now)} after the overlay first changed it")
    for rel, ident in reads.items():
        if ident.kind == "watch":  # the whole project, read by commands that could not say what they read
            for c in _watched(ident):
                out.setdefault(c.path, c)
            continue
        if rel in out:
            continue
        if ident.kind == "dir" and ident.sha256 is not None:  # a listing: compare the entry names
            if listing_digest(lower / rel) != ident.sha256:
                out[rel] = Conflict(
                    rel, "listed by the speculation, then entries were added or removed in the real tree"
                )
            continue
        now = Identity.of(lower, rel)
        if not _same(ident, now):
            out[rel] = Conflict(rel, f"read by the speculation, then {_why(ident, now)}")
    return sorted(out.values(), key=lambda c: c.path), seen


def _watched(ident: Identity) -> list[Conflict]:
    """The conflicts of a read record that stands for the whole project (kernel overlayfs and fuse-overlayfs
    record no reads): every change the watch saw (:mod:`overlayfs.treewatch`), or that it cannot vouch."""
    seen = treewatch.seen(ident.sha256 or "")
    out = [Conflict(p, f"{_WHOLE}, then changed in the real tree during the speculation") for p in seen.paths]
    if seen.lost is not None:
        out.append(Conflict(".", f"{_WHOLE}, and {seen.lost}"))
    return out


_WHOLE = (
    "read by the speculation (its commands' backend cannot say what they read: all of the project counts)"
)


def _related(a: str, b: str) -> bool:
    return a == b or a == "." or b == "." or a.startswith(b + "/") or b.startswith(a + "/")


def parent_dirs(rel: str) -> list[str]:
    parts = rel.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def selects(r: str, path: str) -> bool:
    return r == "." or path == r or path.startswith(r + "/")


def drop_dependents(changes: list[Change], conflicts: list[Conflict]) -> tuple[list[Change], list[Conflict]]:
    """Remove changes at, above or below a conflicting path (to a fixpoint); report them as conflicts."""
    blocked = {c.path: c.path for c in conflicts}
    keep = list(changes)
    while True:
        nxt = []
        for ch in keep:
            hit = next((q for q in blocked if _related(ch.path, q)), None)
            if hit is None:
                nxt.append(ch)
            elif ch.path not in blocked:
                blocked[ch.path] = hit
        if len(nxt) == len(keep):
            break
        keep = nxt
    extra = [Conflict(p, f"depends on conflicting path {q}") for p, q in blocked.items() if p != q]
    return keep, extra
