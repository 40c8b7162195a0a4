"""Promotion: the conflict check, the plan of a journaled atomic write into the real tree, and what a
finished promotion leaves in the upper layer.

Protocol (see docs/overlay.md): under the project's lock (:mod:`overlayfs.state`) settle any promotion a dead
process left; compute ``changes()`` and check them against the real tree; plan removals, new directories
and puts; hand the plan to :mod:`overlayfs.journal`, which stages, commits, applies (or undoes) it; finally
clear the promoted entries from the upper layer. Every file ends up entirely old or entirely new, and all
of them together, even when the process is killed at any point.
"""

from __future__ import annotations

import errno
import json
import os
import stat as stat_mod
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from overlayfs import journal
from overlayfs.changes import Change
from overlayfs.copyup import stat_mode
from overlayfs.journal import TEMP_SUFFIX, Journal
from overlayfs.layer import BASES_FILE, READS_FILE, Identity, is_opaque, listing_digest, load_identities
from overlayfs.merged import join, kind_of, lstat_or_none, parent_of
from overlayfs.state import (
    LOCK_TIMEOUT,
    ProjectState,
    dispose,
    locked,
    pending,
    project_state,
    remove_tree,
    self_token,
)

if TYPE_CHECKING:
    from overlayfs.view import Overlay


@dataclass(frozen=True)
class Conflict:
    """A path whose real-tree state no longer matches what the speculation saw or changed."""

    path: str
    reason: str


@dataclass(frozen=True)
class PromoteResult:
    promoted: list[Change]  # the changes now in the real tree
    conflicts: list[Conflict]  # empty when everything asked for was promoted

    @property
    def ok(self) -> bool:
        return not self.conflicts


# -- conflicts ------------------------------------------------------------------------------------------


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


def find_conflicts(lower: Path, paths: set[str], bases: dict[str, Identity],
                   reads: dict[str, Identity]) -> list[Conflict]:
    """Check ``paths`` (changed ones, and every path whose base was recorded) and the read set."""
    out: dict[str, Conflict] = {}
    for path in sorted(paths):
        now = Identity.of(lower, path)
        base = bases.get(path)
        if base is None:
            if now.exists:  # changed by a writer that recorded no base: assume the worst
                out[path] = Conflict(path, "exists in the real tree and no base was recorded for it")
        elif not _same(base, now):
            out[path] = Conflict(path, f"{_why(base, now)} after the overlay first changed it")
    for rel, ident in reads.items():
        if rel in out:
            continue
        if ident.kind == "dir" and ident.sha256 is not None:  # a listing: compare the entry names
            if listing_digest(lower / rel) != ident.sha256:
                out[rel] = Conflict(rel, "listed by the speculation, then entries were added or removed "
                                         "in the real tree")
            continue
        now = Identity.of(lower, rel)
        if not _same(ident, now):
            out[rel] = Conflict(rel, f"read by the speculation, then {_why(ident, now)}")
    return sorted(out.values(), key=lambda c: c.path)


def _related(a: str, b: str) -> bool:
    return a == b or a == "." or b == "." or a.startswith(b + "/") or b.startswith(a + "/")


def parent_dirs(rel: str) -> list[str]:
    parts = rel.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _selects(r: str, path: str) -> bool:
    return r == "." or path == r or path.startswith(r + "/")


def _drop_dependents(changes: list[Change], conflicts: list[Conflict]) -> tuple[list[Change], list[Conflict]]:
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


# -- plan -----------------------------------------------------------------------------------------------


class _RealTree:
    """lstat-only questions about the real tree that never follow a symlink in an ancestor."""

    def __init__(self, lower: str) -> None:
        self.lower = lower
        self.dirs: dict[str, bool] = {".": True}

    def is_dir(self, rel: str) -> bool:
        if rel not in self.dirs:
            parent = parent_of(rel)[0]
            st = lstat_or_none(f"{self.lower}/{rel}") if self.is_dir(parent) else None
            self.dirs[rel] = st is not None and stat_mod.S_ISDIR(st.st_mode)
        return self.dirs[rel]

    def lstat(self, rel: str) -> os.stat_result | None:
        return lstat_or_none(f"{self.lower}/{rel}") if self.is_dir(parent_of(rel)[0]) else None


def _plan(lower: str, upper: str, metadir: Path, changes: list[Change], *, full: bool,
          durable: bool, owner: str | None = None) -> Journal:
    real = _RealTree(lower)
    rms: list[tuple[str, str, int]] = []  # (path, kind, inode of the real entry) to move aside, then delete
    mkdirs: list[tuple[str, int]] = []
    puts: list[str] = []
    replaces: set[str] = set()  # puts over a real file or link: kept as a backup until the end
    for ch in changes:
        if ch.type not in ("file", "dir", "symlink"):
            raise OSError(errno.EOPNOTSUPP, "cannot promote a special file", ch.path)
        st = real.lstat(ch.path)
        real_dir = st is not None and stat_mod.S_ISDIR(st.st_mode)
        if ch.kind == "deleted":
            if st is not None:
                rms.append((ch.path, kind_of(st.st_mode), st.st_ino))
        elif ch.type == "dir":
            if st is not None and not real_dir:
                rms.append((ch.path, kind_of(st.st_mode), st.st_ino))
            if not real_dir:
                mkdirs.append((ch.path, stat_mode(os.lstat(f"{upper}/{ch.path}").st_mode)))
        else:
            if real_dir:
                rms.append((ch.path, "dir", st.st_ino))  # its entries are moved aside by their own changes first
            elif st is not None:
                replaces.add(ch.path)
            puts.append(ch.path)
    rms.sort(key=lambda r: (-r[0].count("/"), r[0]))
    mkdirs.sort(key=lambda m: (m[0].count("/"), m[0]))
    token = uuid.uuid4().hex[:12]
    pre: list[str] = []  # directories that can be made before the commit point (nothing in the way)
    for rel, _ in mkdirs:
        parent = parent_of(rel)[0]
        if (parent in pre or real.is_dir(parent)) and real.lstat(rel) is None:
            pre.append(rel)
            real.dirs[rel] = True
    made = {rel for rel, _ in mkdirs}
    removed = {r[0] for r in rms}
    for rel in [*puts, *made]:
        parent = parent_of(rel)[0]
        if parent not in made and (parent in removed or not real.is_dir(parent)):
            raise ValueError(f"{rel}: cannot promote without its parent directory {parent}")
    trashed: list[tuple[str, str, str, int]] = []
    for i, (rel, kind, ino) in enumerate(rms):
        keep, name = parent_of(rel)
        while keep in removed:  # the nearest directory that stays: the entry must leave its parent
            keep = parent_of(keep)[0]
        trashed.append((rel, kind, join(keep, f".{name[:40]}.{token}.r{i}{TEMP_SUFFIX}"), ino))
    staged: list[tuple[str, str, str | None]] = []
    for i, rel in enumerate(puts):
        parent, name = parent_of(rel)
        stage = parent
        while not real.is_dir(stage):
            stage = parent_of(stage)[0]
        backup = join(parent, f".{name[:40]}.{token}.b{i}{TEMP_SUFFIX}") if rel in replaces else None
        staged.append((rel, join(stage, f".{name[:40]}.{token}.{i}{TEMP_SUFFIX}"), backup))
    root = os.stat(lower)
    return {"version": journal.VERSION, "state": "prepare", "lower": lower, "upper": upper,
            "metadir": str(metadir), "root": [root.st_dev, root.st_ino], "pid": os.getpid(), "token": token,
            "full": full, "durable": durable, "rms": trashed, "mkdirs": mkdirs, "pre": pre, "puts": staged,
            "promoted": [[c.path, c.kind, c.type] for c in changes], "upper_owner": owner}


def _under_opaque(upper: str, rel: str) -> bool:
    while rel != ".":
        p = f"{upper}/{rel}"
        st = lstat_or_none(p)
        if st is not None and stat_mod.S_ISDIR(st.st_mode) and is_opaque(Path(p)):
            return True
        rel = parent_of(rel)[0]
    return False


def _rewrite(metadir: Path, name: str, drop: set[str], add: list[Identity]) -> None:
    kept = [i for p, i in load_identities(metadir, name).items() if p not in drop] + add
    tmp = metadir / (name + ".tmp")
    tmp.write_bytes("".join(json.dumps(asdict(i), ensure_ascii=False) + "\n" for i in kept)
                    .encode("utf-8", "surrogateescape"))
    os.replace(tmp, metadir / name)


def _finalize(lower: str, upper: str, metadir: Path, j: Journal) -> None:
    """Drop promoted entries from the upper layer and their records from the base and read sets."""
    if j["full"]:  # the real tree now equals the merged view: start from an empty upper layer
        for name in (BASES_FILE, READS_FILE):  # first: a crash before the upper goes repeats all of this
            if os.path.exists(metadir / name):
                os.truncate(metadir / name, 0)
        mode = stat_mode(os.stat(upper).st_mode)
        if os.listdir(upper):  # set the old one aside (same filesystem) and delete it on a thread
            tmp = metadir / "tmp"
            if tmp.is_dir() and os.stat(tmp).st_dev == os.stat(upper).st_dev:
                dispose(Path(upper), tmp / f"spent-{uuid.uuid4().hex[:12]}")
            else:
                remove_tree(Path(upper))
            os.mkdir(upper, 0o700)
            os.chmod(upper, mode)
        return
    promoted = [p for p, _, _ in j["promoted"]]
    rebase: list[Identity] = []
    for rel in sorted(promoted, key=lambda p: -p.count("/")):
        if _under_opaque(upper, rel):  # removing it would let the opaque dir hide the promoted file
            rebase.append(Identity.of(Path(lower), rel))
            continue
        udir, name = parent_of(rel)
        udir = upper if udir == "." else f"{upper}/{udir}"
        p = f"{udir}/{name}"
        st = lstat_or_none(p)
        if st is not None and not stat_mod.S_ISDIR(st.st_mode):
            os.unlink(p)  # the promoted file or link, or the whiteout of a promoted deletion
    _rewrite(metadir, BASES_FILE, set(promoted), rebase)
    # Promotion itself changes the listed directories above what it wrote: drop those directory reads.
    touched = set(promoted) | {"."} | {d for p in promoted for d in parent_dirs(p)}
    _rewrite(metadir, READS_FILE, touched, [])


def _finalize_journal(j: Journal) -> None:
    """The upper-layer part of a finished promotion; skipped when that overlay was discarded, or when its
    upper layer was a bounded one (``/proc/<pid>/fd/<n>``) of a process that is gone: it went with it."""
    if j.get("upper_owner") not in (None, self_token()):
        return
    if os.path.isdir(j["metadir"]):
        os.makedirs(j["upper"], exist_ok=True)  # a crash may have come between setting it aside and anew
        _finalize(j["lower"], j["upper"], Path(j["metadir"]), j)


def settle(ps: ProjectState) -> tuple[str, Journal] | None:
    """Finish or undo the promotion a dead process left in ``ps`` (the caller holds the lock).

    Returns (what was done, the journal), or None when nothing was pending."""
    j = journal.read(ps.journal)
    if j is None:
        if pending(ps):
            journal.clear(ps.journal)  # a torn plan: its promotion never staged anything
        return None
    try:
        root = os.stat(j["lower"])
        same = j["lower"] == str(ps.project) and [root.st_dev, root.st_ino] == j["root"]
    except FileNotFoundError:
        same = False
    if not same:  # the project directory was removed or replaced since: its temp names went with it
        journal.clear(ps.journal)
        return "discarded (the project directory was replaced)", j
    return journal.resume(ps.journal, j, _finalize_journal), j


def promote(ov: Overlay, rels: list[str] | None, *, all_or_nothing: bool, durable: bool,
            lock_timeout: float = LOCK_TIMEOUT) -> PromoteResult:
    ps = project_state(ov.lower)
    with locked(ps, lock_timeout):  # one promoter per project; the conflict check must not go stale
        settle(ps)
        return _promote(ov, ps, rels, all_or_nothing=all_or_nothing, durable=durable)


def _promote(ov: Overlay, ps: ProjectState, rels: list[str] | None, *, all_or_nothing: bool,
             durable: bool) -> PromoteResult:
    lower, upper = str(ov.lower), str(ov.upper)
    changes = ov.changes()
    selected = changes
    if rels is not None:
        for r in rels:
            if not any(_selects(r, c.path) for c in changes):
                raise ValueError(f"{r}: no change at or under this path to promote")
        selected = [c for c in changes if any(_selects(r, c.path) for r in rels)]
        chosen = {c.path for c in selected}
        parents = {d for c in selected for d in parent_dirs(c.path)}  # a new file needs its new parent
        selected = [c for c in changes if c.path in chosen
                    or (c.path in parents and c.type == "dir" and c.kind != "deleted")]
    bases = load_identities(ov.metadir, BASES_FILE)
    # Every path the overlay touched counts, changed or not now: a file moved away, then deleted by the
    # user, is as much a conflict as one edited in place.
    check = {c.path for c in selected} | {p for p in bases if rels is None or any(_selects(r, p) for r in rels)}
    conflicts = find_conflicts(ov.lower, check, bases, load_identities(ov.metadir, READS_FILE))
    if conflicts:
        if all_or_nothing:
            return PromoteResult([], conflicts)
        selected, extra = _drop_dependents(selected, conflicts)
        conflicts = sorted(conflicts + extra, key=lambda c: c.path)
    if not selected:
        if not conflicts and len(changes) == 0:  # the upper layer holds nothing new: spend it all the same
            _finalize(lower, upper, ov.metadir, {"full": True})
        return PromoteResult([], conflicts)
    owner = self_token() if getattr(ov, "layer", None) is not None else None  # the layer dies with us
    j = _plan(lower, upper, ov.metadir, selected, full=len(selected) == len(changes), durable=durable,
              owner=owner)
    journal.execute(ps.journal, j, _finalize_journal)
    return PromoteResult(selected, conflicts)
