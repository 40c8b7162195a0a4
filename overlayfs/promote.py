"""Promotion: the plan of a journaled atomic write into the real tree, and what a finished promotion leaves
in the upper layer.

Protocol (see docs/overlay.md): under the project's lock (:mod:`overlayfs.state`) settle any promotion a dead
process left; compute ``changes()``, check them against the real tree (:mod:`overlayfs.conflicts`) and
against what acceptance lands (:mod:`overlayfs.policy`); plan removals, new directories and puts, each with
the stamp the check saw; hand the plan to :mod:`overlayfs.journal`, which stages, commits, applies (or
undoes) it, comparing each stamp again at the last moment; finally clear the promoted entries from the
upper layer. Every file ends up entirely old or entirely new, and all of them together, even when the
process is killed at any point, and a file the user changed after the check is never overwritten.
"""

from __future__ import annotations

import json
import os
import stat as stat_mod
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from overlayfs import journal, leftovers, policy, steps
from overlayfs.changes import Change
from overlayfs.conflicts import Conflict, drop_dependents, find_conflicts, parent_dirs, selects
from overlayfs.copyup import stat_mode
from overlayfs.inplace import forget_replaced, lands_in_place, load_replaced
from overlayfs.journal import TEMP_SUFFIX, Journal, Unsettled
from overlayfs.layer import BASES_FILE, READS_FILE, Identity, is_opaque, load_identities
from overlayfs.merged import join, kind_of, lstat_or_none, parent_of
from overlayfs.stamps import Stamp, stamp
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


class Promotable(Protocol):
    """What promotion needs of an overlay (:class:`overlayfs.view.Overlay` has it): its layers and its
    changes. A protocol, not the class, so that this module does not import the view that imports it."""

    @property
    def lower(self) -> Path: ...

    @property
    def upper(self) -> Path: ...

    @property
    def metadir(self) -> Path: ...

    @property
    def layer(self) -> Any: ...  # the bounded layer, or None

    def changes(self) -> list[Change]: ...


__all__ = ["Conflict", "PromoteResult", "parent_dirs", "promote", "settle"]


@dataclass(frozen=True)
class PromoteResult:
    promoted: list[Change]  # the changes now in the real tree
    conflicts: list[Conflict]  # empty when everything asked for was promoted
    # Left to clean up after everything landed (our temp names on a filesystem that turned read-only);
    # the journal stays pending and the next recovery finishes it.
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.conflicts


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


def _plan(
    lower: str,
    upper: str,
    metadir: Path,
    changes: list[Change],
    *,
    full: bool,
    durable: bool,
    seen: dict[str, Stamp | None] | None = None,
    owner: str | None = None,
) -> Journal:
    """The journal of a promotion of ``changes``; ``seen`` holds the stamps the conflict check saw, which
    apply compares again before it replaces or removes each real entry (default: the stamps now); ``owner``
    names the process whose bounded upper layer this is (it dies with that process)."""
    real = _RealTree(lower)
    seen = seen or {}
    rms: list[tuple[str, str, int, Stamp]] = []  # (path, kind, inode, stamp of the real entry) to remove
    mkdirs: list[tuple[str, int]] = []
    puts: list[tuple[str, int | None, Stamp | None]] = []  # (path, mode, stamp of what it replaces)
    replaces: set[str] = set()  # puts over a real file or link: kept as a backup until the end
    inplace: list[int] = []  # puts written into the real file's own inode (overlayfs.inplace)
    replaced = load_replaced(metadir)
    for ch in changes:
        if ch.type not in ("file", "dir", "symlink") and ch.kind != "deleted":
            raise ValueError(f"{ch.path}: cannot promote a special file")  # policy.refusals stops these first
        st = real.lstat(ch.path)
        want = seen.get(ch.path, stamp(st) if st is not None else None)
        real_dir = st is not None and stat_mod.S_ISDIR(st.st_mode)
        if ch.kind == "deleted":
            if st is not None:
                rms.append((ch.path, kind_of(st.st_mode), st.st_ino, want))  # type: ignore[arg-type]  # st: want set
            continue
        new = os.lstat(f"{upper}/{ch.path}").st_mode
        mode = policy.landed_mode(new, policy.same_kind(st, new))
        if ch.type == "dir":
            if st is not None and not real_dir:
                rms.append((ch.path, kind_of(st.st_mode), st.st_ino, want))  # type: ignore[arg-type]  # st: want set
            if not real_dir:
                mkdirs.append((ch.path, mode))
        else:
            if real_dir:  # its entries are moved aside by their own changes first
                rms.append((ch.path, "dir", st.st_ino, want))  # type: ignore[union-attr, arg-type]  # real_dir: st set
                want = None
            elif st is not None:
                replaces.add(ch.path)
                if ch.type == "file" and lands_in_place(
                    f"{lower}/{ch.path}", st, f"{upper}/{ch.path}", ch.path in replaced
                ):
                    inplace.append(len(puts))
            puts.append((ch.path, None if ch.type == "symlink" else mode, want))
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
    for rel in [*(p for p, _, _ in puts), *made]:
        parent = parent_of(rel)[0]
        if parent not in made and (parent in removed or not real.is_dir(parent)):
            raise ValueError(f"{rel}: cannot promote without its parent directory {parent}")
    trashed = []
    for i, (rel, kind, ino, want) in enumerate(rms):
        keep, name = parent_of(rel)
        while keep in removed:  # the nearest directory that stays: the entry must leave its parent
            keep = parent_of(keep)[0]
        trashed.append((rel, kind, join(keep, f".{name[:40]}.{token}.r{i}{TEMP_SUFFIX}"), ino, want))
    staged = []
    for i, (rel, put_mode, want) in enumerate(puts):
        parent, name = parent_of(rel)
        stage = parent
        while not real.is_dir(stage):
            stage = parent_of(stage)[0]
        backup = join(parent, f".{name[:40]}.{token}.b{i}{TEMP_SUFFIX}") if rel in replaces else None
        staged.append((rel, join(stage, f".{name[:40]}.{token}.{i}{TEMP_SUFFIX}"), backup, put_mode, want))
    root = os.stat(lower)
    return {
        "version": journal.VERSION,
        "state": "prepare",
        "lower": lower,
        "upper": upper,
        "metadir": str(metadir),
        "root": [root.st_dev, root.st_ino],
        "pid": os.getpid(),
        "token": token,
        "full": full,
        "durable": durable,
        "checks": steps.RECHECK,
        "rms": trashed,
        "mkdirs": mkdirs,
        "pre": pre,
        "puts": staged,
        "inplace": inplace,
        # Replaced as a whole by the view (the Edit and Write tools): its owner is the fork's, as live,
        # where Claude Code's tools leave a file they replace to whoever runs them.
        "as_created": [i for i, (rel, _, _) in enumerate(puts) if replaced.get(rel)],
        "promoted": [[c.path, c.kind, c.type] for c in changes],
        "upper_owner": owner,
    }


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
    tmp.write_bytes(
        "".join(json.dumps(asdict(i), ensure_ascii=False) + "\n" for i in kept).encode(
            "utf-8", "surrogateescape"
        )
    )
    os.replace(tmp, metadir / name)


def _finalize(lower: str, upper: str, metadir: Path, j: Journal) -> None:
    """Drop promoted entries from the upper layer and their records from the base and read sets."""
    if j["full"]:  # the real tree now equals the merged view: start from an empty upper layer
        for name in (BASES_FILE, READS_FILE):  # first: a crash before the upper goes repeats all of this
            if os.path.exists(metadir / name):
                os.truncate(metadir / name, 0)
        forget_replaced(metadir, None)
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
    forget_replaced(metadir, set(promoted))
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

    Returns (what was done, the journal), or None when nothing was pending. Raises Unsettled (naming the
    project, the cause and what to do) when the journal can be neither finished nor undone now."""
    try:
        j = journal.read(ps.journal)
    except (ValueError, KeyError, TypeError) as e:  # another version's, or damaged
        raise Unsettled(str(ps.project), 0, "unreadable", f"{ps.journal}: {e}", []) from e
    if j is None:
        if pending(ps):
            _clear(ps, None)  # a torn plan: its promotion never staged anything
        return None
    try:
        root = os.stat(j["lower"])
        same = j["lower"] == str(ps.project) and [root.st_dev, root.st_ino] == j["root"]
    except FileNotFoundError:
        same = False
    if not same:
        # Adopted from a moved project (same device/inode), or a disk mounted again (its names are here):
        # the plan is rewritten for this path. Else the directory was replaced, or its disk is not mounted:
        # the journal is kept for it, never dropped (overlayfs.leftovers).
        if leftovers.belongs(ps.project, j) is None:
            raise leftovers.set_aside(ps, j)
        leftovers.rehome(ps.journal, ps.project)
        j = journal.read(ps.journal)
        assert j is not None
    return journal.resume(ps.journal, j, _finalize_journal), j


def _clear(ps: ProjectState, j: Journal | None) -> None:
    try:
        journal.clear(ps.journal)
    except OSError as e:
        n = 0 if j is None else len(j["promoted"])
        raise Unsettled(
            str(ps.project), n, "prepare", f"the journal {ps.journal} could not be cleared ({e.strerror})", []
        ) from e


def promote(
    ov: Promotable,
    rels: list[str] | None,
    *,
    all_or_nothing: bool,
    durable: bool,
    lock_timeout: float = LOCK_TIMEOUT,
) -> PromoteResult:
    ps = project_state(ov.lower)
    with locked(ps, lock_timeout):  # one promoter per project; the conflict check must not go stale
        try:
            settle(ps)
        except leftovers.SetAside:
            pass  # another directory's journal, kept for it: nothing pending for this one
        return _promote(ov, ps, rels, all_or_nothing=all_or_nothing, durable=durable)


def _promote(
    ov: Promotable, ps: ProjectState, rels: list[str] | None, *, all_or_nothing: bool, durable: bool
) -> PromoteResult:
    lower, upper = str(ov.lower), str(ov.upper)
    changes = ov.changes()
    selected = changes
    if rels is not None:
        for r in rels:
            if not any(selects(r, c.path) for c in changes):
                raise ValueError(f"{r}: no change at or under this path to promote")
        selected = [c for c in changes if any(selects(r, c.path) for r in rels)]
        chosen = {c.path for c in selected}
        parents = {d for c in selected for d in parent_dirs(c.path)}  # a new file needs its new parent
        selected = [
            c
            for c in changes
            if c.path in chosen or (c.path in parents and c.type == "dir" and c.kind != "deleted")
        ]
    bases = load_identities(ov.metadir, BASES_FILE)
    # Every path the overlay touched counts, changed or not now: a file moved away, then deleted by the
    # user, is as much a conflict as one edited in place.
    check = {c.path for c in selected} | {
        p for p in bases if rels is None or any(selects(r, p) for r in rels)
    }
    conflicts, seen = find_conflicts(ov.lower, check, bases, load_identities(ov.metadir, READS_FILE))
    conflicts = sorted(conflicts + policy.refusals(lower, upper, selected), key=lambda c: c.path)
    if conflicts:
        if all_or_nothing:
            return PromoteResult([], conflicts)
        selected, extra = drop_dependents(selected, conflicts)
        conflicts = sorted(conflicts + extra, key=lambda c: c.path)
    if not selected:
        if not conflicts and len(changes) == 0:  # the upper layer holds nothing new: spend it all the same
            _finalize(lower, upper, ov.metadir, {"full": True})
        return PromoteResult([], conflicts)
    owner = self_token() if ov.layer is not None else None  # the layer dies with us
    j = _plan(
        lower,
        upper,
        ov.metadir,
        selected,
        full=len(selected) == len(changes),
        durable=durable,
        seen=seen if steps.RECHECK else None,
        owner=owner,
    )
    out = journal.execute(ps.journal, j, _finalize_journal)
    if out.changed is not None:  # the user changed a target after the check: nothing landed
        return PromoteResult(
            [], sorted([*conflicts, Conflict(out.changed.rel, out.changed.reason)], key=lambda c: c.path)
        )
    return PromoteResult(selected, conflicts, out.notes)
