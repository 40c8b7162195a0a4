"""Promotion: conflict check, then a journaled, atomic write of an overlay's changes into the real tree.

Protocol (see docs/overlay.md): plan from ``changes()``; write the journal (state ``prepare``); create new
directories and stage every new file as a temp file in its target directory (or the nearest directory that
exists); flip the journal to ``commit`` (the commit point, one atomic rename); delete, mkdir and rename the
temp files into place; clear the promoted entries from the upper layer; remove the journal. On the next
open a ``prepare`` journal is rolled back (temp files and new directories removed) and a ``commit`` one is
rolled forward, so every file ends up entirely old or entirely new, and all of them together.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat as stat_mod
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from overlayfs.changes import Change
from overlayfs.copyup import copy_file, fsync_dir, stat_mode
from overlayfs.layer import BASES_FILE, READS_FILE, Identity, is_opaque, listing_digest, load_identities
from overlayfs.merged import join, lstat_or_none, parent_of
from overlayfs.upper import drop_wh_file

if TYPE_CHECKING:
    from overlayfs.view import Overlay

JOURNAL = "promote.journal"


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


def _plan(lower: str, upper: str, changes: list[Change], *, full: bool, durable: bool) -> dict[str, Any]:
    real = _RealTree(lower)
    rms: list[str] = []
    mkdirs: list[tuple[str, int]] = []
    puts: list[str] = []
    for ch in changes:
        if ch.type not in ("file", "dir", "symlink"):
            raise OSError(errno.EOPNOTSUPP, "cannot promote a special file", ch.path)
        st = real.lstat(ch.path)
        real_dir = st is not None and stat_mod.S_ISDIR(st.st_mode)
        if ch.kind == "deleted":
            rms.append(ch.path)
        elif ch.type == "dir":
            if st is not None and not real_dir:
                rms.append(ch.path)
            if not real_dir:
                mkdirs.append((ch.path, stat_mode(os.lstat(f"{upper}/{ch.path}").st_mode)))
        else:
            if real_dir:
                rms.append(ch.path)  # its entries are deleted by their own changes first
            puts.append(ch.path)
    rms.sort(key=lambda p: (-p.count("/"), p))
    mkdirs.sort(key=lambda m: (m[0].count("/"), m[0]))
    token = uuid.uuid4().hex[:12]
    pre: list[str] = []  # directories that can be made before the commit point (nothing in the way)
    for rel, _ in mkdirs:
        parent = parent_of(rel)[0]
        if (parent in pre or real.is_dir(parent)) and real.lstat(rel) is None:
            pre.append(rel)
            real.dirs[rel] = True
    made = {rel for rel, _ in mkdirs}
    for rel in [*puts, *made]:
        parent = parent_of(rel)[0]
        if parent not in made and (parent in rms or not real.is_dir(parent)):
            raise ValueError(f"{rel}: cannot promote without its parent directory {parent}")
    staged: list[tuple[str, str]] = []
    for i, rel in enumerate(puts):
        stage, name = parent_of(rel)
        while not real.is_dir(stage):
            stage = parent_of(stage)[0]
        staged.append((rel, join(stage, f".{name[:40]}.{token}.{i}.ovl-tmp")))
    return {"version": 1, "state": "prepare", "lower": lower, "token": token, "full": full,
            "durable": durable, "rms": rms, "mkdirs": mkdirs, "pre": pre, "puts": staged,
            "promoted": [[c.path, c.kind, c.type] for c in changes]}


def _write_journal(metadir: Path, data: dict[str, Any]) -> None:
    tmp = metadir / (JOURNAL + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)  # ensure_ascii: non-UTF-8 names travel as \udcXX escapes and come back
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, metadir / JOURNAL)
    fsync_dir(str(metadir))


# -- the protocol ---------------------------------------------------------------------------------------


def _prepare(lower: str, upper: str, j: dict[str, Any]) -> None:
    modes = dict((rel, mode) for rel, mode in j["mkdirs"])
    for rel in j["pre"]:
        os.mkdir(f"{lower}/{rel}", 0o700)
        os.chmod(f"{lower}/{rel}", modes[rel])
    dirs = set()
    for rel, tmp in j["puts"]:
        src, dst = f"{upper}/{rel}", f"{lower}/{tmp}"
        st = os.lstat(src)
        if stat_mod.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(src), dst)
        else:
            copy_file(src, dst, mode=stat_mode(st.st_mode), fsync=j["durable"])
        dirs.add(os.path.dirname(dst))
    if j["durable"]:
        for d in dirs:
            fsync_dir(d)


def _rollback(lower: str, j: dict[str, Any]) -> None:
    for _, tmp in j["puts"]:
        try:
            os.unlink(f"{lower}/{tmp}")
        except FileNotFoundError:
            pass
    for rel in reversed(j["pre"]):
        try:
            os.rmdir(f"{lower}/{rel}")
        except OSError:
            pass  # gone already, or someone put something in it: leave it


def _apply(lower: str, j: dict[str, Any]) -> None:
    """Roll forward from the commit point; every step is idempotent so a crash here is repeated safely."""
    for rel in j["rms"]:
        p = f"{lower}/{rel}"
        st = lstat_or_none(p)
        if st is None:
            continue
        if stat_mod.S_ISDIR(st.st_mode):
            try:
                os.rmdir(p)
            except OSError as e:
                if e.errno != errno.ENOTEMPTY:
                    raise
        else:
            os.unlink(p)
    for rel, mode in j["mkdirs"]:
        try:
            os.mkdir(f"{lower}/{rel}", 0o700)
            os.chmod(f"{lower}/{rel}", mode)
        except FileExistsError:
            pass
    dirs = set()
    for rel, tmp in j["puts"]:
        if os.path.lexists(f"{lower}/{tmp}"):
            os.replace(f"{lower}/{tmp}", f"{lower}/{rel}")
        dirs.add(os.path.dirname(f"{lower}/{rel}"))
    if j["durable"]:
        for d in dirs:
            fsync_dir(d)


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


def _finalize(lower: str, upper: str, metadir: Path, j: dict[str, Any]) -> None:
    """Drop promoted entries from the upper layer and their records from the base and read sets."""
    if j["full"]:  # the real tree now equals the merged view: start from an empty upper layer
        for name in os.listdir(upper):
            p = f"{upper}/{name}"
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p)
            else:
                os.unlink(p)
        _rewrite(metadir, BASES_FILE, set(load_identities(metadir, BASES_FILE)), [])
        _rewrite(metadir, READS_FILE, set(load_identities(metadir, READS_FILE)), [])
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
            os.unlink(p)
        drop_wh_file(udir, name)
    _rewrite(metadir, BASES_FILE, set(promoted), rebase)
    # Promotion itself changes the listed directories above what it wrote: drop those directory reads.
    touched = set(promoted) | {"."} | {d for p in promoted for d in parent_dirs(p)}
    _rewrite(metadir, READS_FILE, touched, [])


def recover(ov: Overlay) -> None:
    """Finish or undo a promotion that a crash interrupted (called when an overlay is opened)."""
    path = ov.metadir / JOURNAL
    try:
        j = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return
    if j["lower"] != str(ov.lower):
        raise ValueError(f"{path}: journal of a promotion into {j['lower']}, not {ov.lower}")
    if j["state"] == "commit":
        _apply(j["lower"], j)
        _finalize(j["lower"], str(ov.upper), ov.metadir, j)
    else:
        _rollback(j["lower"], j)
    path.unlink()
    fsync_dir(str(ov.metadir))


def promote(ov: Overlay, rels: list[str] | None, *, all_or_nothing: bool, durable: bool) -> PromoteResult:
    recover(ov)
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
    j = _plan(lower, upper, selected, full=len(selected) == len(changes), durable=durable)
    _write_journal(ov.metadir, j)
    try:
        _prepare(lower, upper, j)
    except BaseException:
        _rollback(lower, j)
        (ov.metadir / JOURNAL).unlink()
        raise
    _write_journal(ov.metadir, {**j, "state": "commit"})  # the commit point
    _apply(lower, j)
    _finalize(lower, upper, ov.metadir, j)
    (ov.metadir / JOURNAL).unlink()
    return PromoteResult(selected, conflicts)
