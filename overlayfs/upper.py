"""Writing the upper layer: copy-up, atomic replacement, whiteouts, and the bookkeeping of bases and reads.

:class:`Upper` knows the on-disk layout of one overlay (upper, work and meta dirs) but nothing of path
resolution: :class:`overlayfs.view.Overlay` resolves a user path to merged-view nodes and calls in here.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import stat as stat_mod
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

from overlayfs.copyup import ALL_XATTRS, copy_file, stat_mode, write_all
from overlayfs.layer import (
    BASES_FILE,
    HASH_LIMIT,
    READS_FILE,
    Identity,
    is_whiteout_at,
    listing_digest,
    load_identities,
    make_opaque,
    make_whiteout,
    record_base,
    record_read,
)
from overlayfs.merged import Node, Resolved, entries, join, lstat_or_none, parent_of, step


def _read_umask() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022


UMASK = _read_umask()


@dataclass(frozen=True)
class OverlayStatistics:
    """Counters of one overlay object (this process only)."""

    copy_ups: int  # lower files copied into the upper layer
    bytes_copied: int  # bytes of those copies
    reads_recorded: int  # lower files added to the read set
    bases_recorded: int  # conflict bases recorded at first change of a path


class Upper:
    def __init__(self, lower: str, upper: str, metadir: Path, *, tmp: str | None = None) -> None:
        self.lower = lower
        self.upper = upper
        self.metadir = metadir
        if tmp is None:  # a bounded layer brings its own, on its filesystem
            tmp = str(metadir / "tmp")
            os.makedirs(tmp, exist_ok=True)
        # Temp files are renamed into the upper layer, so they must live on its filesystem.
        self.tmp: str | None = tmp if os.stat(tmp).st_dev == os.stat(upper).st_dev else None
        self.copy_ups = 0
        self.bytes_copied = 0
        self.reads_recorded = 0
        self.bases_recorded = 0
        self.reload()

    def reload(self) -> None:
        """Reload which paths already have a base / read record (after open and after promotion)."""
        self.based = set(load_identities(self.metadir, BASES_FILE))
        self.read = set(load_identities(self.metadir, READS_FILE))

    def statistics(self) -> OverlayStatistics:
        return OverlayStatistics(self.copy_ups, self.bytes_copied, self.reads_recorded, self.bases_recorded)

    # -- bookkeeping ---------------------------------------------------------------------------------

    def record_base(self, rel: str) -> None:
        """Record what the real tree holds at ``rel`` before the first change to it (first record wins)."""
        if rel in self.based:
            return
        record_base(self.metadir, Identity.of(Path(self.lower), rel))
        self.based.add(rel)
        self.bases_recorded += 1

    def record_subtree(self, node: Node) -> None:
        """Record bases for ``node`` and every merged entry beneath it (before a delete or rename)."""
        self.record_base(node.rel)
        if node.kind != "dir":
            return
        for name in entries(node):
            child = step(node, name)
            if child is not None:
                self.record_subtree(child)

    def note_read(self, rel: str, st: os.stat_result, data: bytes | None) -> None:
        """Add a lower file the speculation read to the read set (identity of what was actually read)."""
        if rel in self.read:
            return
        if data is not None:
            digest = hashlib.sha256(data).hexdigest() if len(data) <= HASH_LIMIT else None
            ident = Identity(rel, True, "file", st.st_size, st.st_mtime_ns, st.st_ino, digest)
        else:
            ident = Identity.of(Path(self.lower), rel)
        record_read(self.metadir, ident)
        self.read.add(rel)
        self.reads_recorded += 1

    def note_dir_read(self, rel: str) -> None:
        """Add a lower directory the speculation listed to the read set: an entry the user adds or removes
        there later changes its mtime, so a conclusion drawn from the listing (Glob, Grep) is checked too."""
        if rel in self.read:
            return
        ident = Identity.of(Path(self.lower), rel)
        if ident.kind != "dir":
            return
        ident = replace(ident, sha256=listing_digest(Path(self.lower) / rel))
        record_read(self.metadir, ident)
        self.read.add(rel)
        self.reads_recorded += 1

    # -- upper layer mutations -----------------------------------------------------------------------

    def _tmp_name(self) -> str:
        return f"{self.tmp}/{uuid.uuid4().hex}"

    def copy_up_dir(self, rel: str) -> str:
        """Make sure merged directory ``rel`` (canonical) has an upper directory; returns its path."""
        up = self.upper if rel == "." else f"{self.upper}/{rel}"
        st = lstat_or_none(up)
        if st is not None and stat_mod.S_ISDIR(st.st_mode):
            return up
        parent, _ = parent_of(rel)
        self.copy_up_dir(parent)
        lst = lstat_or_none(f"{self.lower}/{rel}")
        mode = stat_mode(lst.st_mode) if lst is not None and stat_mod.S_ISDIR(lst.st_mode) else 0o755
        os.mkdir(up, 0o700)
        os.chmod(up, mode)
        return up

    def clear_slot(self, udir: str, name: str) -> None:
        """Remove whatever the upper layer holds at ``name`` (an entry or a whiteout)."""
        p = f"{udir}/{name}"
        st = lstat_or_none(p)
        if st is not None:
            if stat_mod.S_ISDIR(st.st_mode):
                shutil.rmtree(p)
            else:
                os.unlink(p)

    def _install(self, tmp: str, udir: str, name: str) -> None:
        dst = f"{udir}/{name}"
        st = lstat_or_none(dst)
        if st is not None and stat_mod.S_ISDIR(st.st_mode):
            shutil.rmtree(dst)
        os.replace(tmp, dst)  # replaces a file, a symlink or a whiteout (either form) in one step

    def put_bytes(self, udir: str, name: str, data: bytes, mode: int) -> None:
        """Atomically make upper ``udir/name`` a regular file holding ``data`` with ``mode``."""
        if self.tmp is None:  # meta dir on another filesystem: write in place
            self.clear_slot(udir, name)
            tmp = f"{udir}/{name}"
        else:
            tmp = self._tmp_name()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            write_all(fd, data)  # a short write on a full disk is retried until it raises ENOSPC
            os.fchmod(fd, mode)
        except Exception:
            os.close(fd)
            os.unlink(tmp)  # never a truncated file in the upper layer
            raise
        try:
            os.close(fd)
        except OSError:
            os.unlink(tmp)
            raise
        if self.tmp is not None:
            self._install(tmp, udir, name)

    def copy_up_file(self, src: str, udir: str, name: str) -> None:
        """Copy regular file ``src`` (usually lower) to upper ``udir/name``, keeping mode and times."""
        st = os.lstat(src)
        tmp = self._tmp_name() if self.tmp is not None else f"{udir}/{name}"
        if self.tmp is None:
            self.clear_slot(udir, name)
        try:
            n = copy_file(
                src,
                tmp,
                mode=stat_mode(st.st_mode),
                times_ns=(st.st_atime_ns, st.st_mtime_ns),
                keep_xattrs=ALL_XATTRS,  # as kernel overlayfs' copy-up: and promotion tells in-place writes by them
            )
        except OSError:
            if os.path.lexists(tmp):
                os.unlink(tmp)
            raise
        if self.tmp is not None:
            self._install(tmp, udir, name)
        self.copy_ups += 1
        self.bytes_copied += n

    def new_file(self, udir: str, name: str, mode: int | None) -> str:
        """Prepare upper ``udir/name`` for an ``open(..., "w")``: whiteouts gone; returns the path."""
        p = f"{udir}/{name}"
        st = lstat_or_none(p)
        if st is not None and (is_whiteout_at(p, st) or not stat_mod.S_ISREG(st.st_mode)):
            self.clear_slot(udir, name)
        if mode is not None and lstat_or_none(p) is None:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.fchmod(fd, mode)
            os.close(fd)
        return p

    def remove(self, udir: str, parent: Node, name: str) -> None:
        """Delete merged entry ``name`` of ``parent``: drop its upper entry, white out a lower one."""
        self.clear_slot(udir, name)
        if parent.lower is not None and os.path.lexists(f"{parent.lower}/{name}"):
            make_whiteout(Path(udir), name)

    def materialize(self, node: Node, dst: str) -> None:
        """Write the merged subtree of directory ``node`` as a plain upper tree at ``dst`` (for rename)."""
        os.mkdir(dst, 0o700)
        os.chmod(dst, stat_mode(node.st.st_mode))
        for name in sorted(entries(node)):
            child = step(node, name)
            if child is None:
                continue
            target = f"{dst}/{name}"
            if child.kind == "dir":
                self.materialize(child, target)
            elif child.kind == "symlink":
                os.symlink(os.readlink(child.path), target)
            elif child.kind == "file":
                self.copy_up_file(child.path, dst, name)
            else:
                raise OSError(errno.EOPNOTSUPP, "cannot move a special file", join(node.rel, name))

    def move(self, src: Resolved, dst: Resolved) -> None:
        """Rename merged entry ``src`` to ``dst`` (both checked by the caller: dst absent or replaceable)."""
        sn = src.node
        assert sn is not None
        self._record_move(sn, src.rel, dst.rel)
        if dst.node is not None:
            self.record_subtree(dst.node)
        sdir = self.copy_up_dir(src.parent.rel)
        ddir = self.copy_up_dir(dst.parent.rel)
        dname = parent_of(dst.rel)[1]
        target = f"{ddir}/{dname}"
        self.clear_slot(ddir, dname)
        if sn.kind == "dir":
            if sn.upper is not None and sn.lower is None:  # wholly in the upper layer: one rename
                os.rename(sn.upper, target)
            else:
                try:
                    self.materialize(sn, target)
                except Exception:  # e.g. ENOSPC half-way: no half-copied directory at the destination
                    shutil.rmtree(target, ignore_errors=True)
                    raise
            make_opaque(Path(target))  # whatever the real tree has at dst stays hidden
        elif sn.upper is not None:
            os.rename(sn.upper, target)
        elif sn.kind == "symlink":
            os.symlink(os.readlink(sn.path), target)
        else:
            self.copy_up_file(sn.path, ddir, dname)
        self.remove(sdir, src.parent, parent_of(src.rel)[1])

    def _record_move(self, node: Node, src_rel: str, dst_rel: str) -> None:
        """Bases for every path a move deletes (under src) and creates (the same suffixes under dst)."""
        self.record_base(node.rel)
        self.record_base(dst_rel + node.rel[len(src_rel) :])
        if node.kind == "dir":
            for name in entries(node):
                child = step(node, name)
                if child is not None:
                    self._record_move(child, src_rel, dst_rel)
