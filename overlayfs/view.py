"""The pure-Python merged view of a project and its upper layer: :class:`Overlay`.

The semantics of each writing operation live here, those of reading in :mod:`overlayfs.viewread`; opening
the layers and looking up callers' paths are in :mod:`overlayfs.viewbase`.
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import IO, Any

from overlayfs.changes import Change, compute_changes, unified_diff
from overlayfs.copyup import copy_xattrs, stat_mode
from overlayfs.inplace import record_replaced
from overlayfs.layer import BASES_FILE, READS_FILE, Identity, load_identities, make_opaque
from overlayfs.merged import entries, parent_of
from overlayfs.paths import check_link_target
from overlayfs.promote import PromoteResult, promote
from overlayfs.state import LOCK_TIMEOUT, dispose
from overlayfs.upper import UMASK, OverlayStatistics
from overlayfs.viewbase import StrPath, path_error
from overlayfs.viewread import ViewReads


def _copy_xattrs(src: str, dst: str) -> None:
    sfd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        dfd = os.open(dst, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            copy_xattrs(sfd, dfd)
        finally:
            os.close(dfd)
    finally:
        os.close(sfd)


def _writes(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A method that writes the upper layer: the kept mount is told first, cached lookups dropped around it."""

    @functools.wraps(fn)
    def call(self: Overlay, *args: Any, **kwargs: Any) -> Any:
        self._before_write()
        try:
            return fn(self, *args, **kwargs)
        finally:
            self._lookups.clear()

    return call


class Overlay(ViewReads):
    """A copy-on-write view of ``lower`` (the real project): reads see the merged tree, writes go to ``upper``.

    ``upper=None`` creates a private base directory holding ``upper/``, ``work/`` and ``meta/`` in the
    project's state dir (O(1): nothing is copied; see overlayfs.state), named by this process so that a later
    one can remove it if this one dies. A given ``upper`` reopens or creates that upper layer, with ``work/``
    and ``meta/`` as its siblings unless ``workdir``/``metadir`` say otherwise. ``bound``
    (:class:`overlayfs.bounded.LayerBound`) puts ``upper/`` and ``work/`` on a private filesystem of that
    size instead, in memory, freed by :meth:`discard` or with this process: a write past it fails with
    ENOSPC, whoever writes (this view, a FUSE server, kernel overlayfs). A promotion into the project
    interrupted by a crash is rolled forward or back first (``recovery`` says what was done). Paths are
    relative to the project root or absolute inside it.
    """

    # -- writing (reading is ViewReads') --------------------------------------------------------------

    @_writes
    def write_bytes(self, path: StrPath, data: bytes) -> None:
        r = self._resolve(path)  # writing through a symlink writes its target, as on a real filesystem
        node = r.node
        if node is not None and node.kind != "file":
            raise path_error(errno.EISDIR if node.kind == "dir" else errno.EINVAL, path)
        name = self._writable_name(r.rel, path)
        udir = self._up.copy_up_dir(r.parent.rel)
        self._up.record_base(r.rel)
        mode = stat_mode(node.st.st_mode) if node is not None else 0o666 & ~UMASK
        self._up.put_bytes(udir, name, bytes(data), mode)
        if node is not None:  # a new inode, as live: never landed in place (overlayfs.inplace)
            record_replaced(self.metadir, r.rel, by_tool=True)

    def write_text(self, path: StrPath, data: str, encoding: str = "utf-8", errors: str = "strict") -> None:
        self.write_bytes(path, data.encode(encoding, errors))

    def open(
        self,
        path: StrPath,
        mode: str = "r",
        buffering: int = -1,
        encoding: str | None = None,
        errors: str | None = None,
        newline: str | None = None,
    ) -> IO[Any]:
        """``open()`` through the view, for streaming large files; writing modes copy up first."""
        r = self._resolve(path)
        node = r.node
        if node is not None and node.kind == "dir":
            raise path_error(errno.EISDIR, path)
        if not any(c in mode for c in "wax+"):
            node = self._need(r, path)
            f = open(node.path, mode, buffering, encoding, errors, newline)
            if node.upper is None:
                self._up.note_read(r.rel, os.fstat(f.fileno()), None)
            return f
        if node is not None and node.kind != "file":
            raise path_error(errno.EINVAL, path)
        self._before_write()  # and the lookups cached while the caller writes are not kept: see below
        if "x" in mode and node is not None:
            raise path_error(errno.EEXIST, path)
        if node is None and "r" in mode:
            raise path_error(errno.ENOENT, path)
        name = self._writable_name(r.rel, path)
        udir = self._up.copy_up_dir(r.parent.rel)
        self._up.record_base(r.rel)
        if node is not None and node.upper is None and ("a" in mode or "r" in mode):
            self._up.copy_up_file(node.path, udir, name)
            target = f"{udir}/{name}"
        else:
            keep = stat_mode(node.st.st_mode) if node is not None and node.upper is None else None
            target = self._up.new_file(udir, name, keep)
            if keep is not None:  # a truncating open keeps the inode live: its xattrs and ACL (a copy-up)
                assert node is not None
                _copy_xattrs(node.path, target)
        f = open(target, mode, buffering, encoding, errors, newline)
        self._lookups.clear()
        return f

    @_writes
    def mkdir(self, path: StrPath, parents: bool = False, exist_ok: bool = False) -> None:
        try:
            r = self._resolve(path, follow=False)
        except FileNotFoundError:
            if not parents:
                raise path_error(errno.ENOENT, path) from None
            self.mkdir(parent_of(self._rel(path))[0], parents=True, exist_ok=True)
            r = self._resolve(path, follow=False)
        if r.node is not None:
            if exist_ok and self.is_dir(path):
                return
            raise path_error(errno.EEXIST, path)
        name = self._writable_name(r.rel, path)
        udir = self._up.copy_up_dir(r.parent.rel)
        self._up.record_base(r.rel)
        target = f"{udir}/{name}"
        # A directory made where a lower entry was deleted must hide that entry's old contents.
        hidden = r.parent.lower is not None and os.path.lexists(f"{r.parent.lower}/{name}")
        self._up.clear_slot(udir, name)
        os.mkdir(target)
        if hidden:
            make_opaque(Path(target))

    @_writes
    def unlink(self, path: StrPath) -> None:
        r = self._resolve(path, follow=False)
        node = self._need(r, path)
        if node.kind == "dir":
            raise path_error(errno.EISDIR, path)
        name = self._writable_name(r.rel, path)
        self._up.record_base(r.rel)
        self._up.remove(self._up.copy_up_dir(r.parent.rel), r.parent, name)

    @_writes
    def rmdir(self, path: StrPath) -> None:
        r = self._resolve(path, follow=False)
        node = self._need(r, path)
        if node.kind != "dir":
            raise path_error(errno.ENOTDIR, path)
        name = self._writable_name(r.rel, path)
        if entries(node):
            raise path_error(errno.ENOTEMPTY, path)
        self._up.record_base(r.rel)
        self._up.remove(self._up.copy_up_dir(r.parent.rel), r.parent, name)

    @_writes
    def rmtree(self, path: StrPath) -> None:
        r = self._resolve(path, follow=False)
        node = self._need(r, path)
        if node.kind == "symlink":
            raise OSError(errno.ENOTDIR, "cannot call rmtree on a symbolic link", os.fsdecode(path))
        if node.kind != "dir":
            raise path_error(errno.ENOTDIR, path)
        name = self._writable_name(r.rel, path)
        self._up.record_subtree(node)
        self._up.remove(self._up.copy_up_dir(r.parent.rel), r.parent, name)

    @_writes
    def rename(self, src: StrPath, dst: StrPath) -> None:
        """Rename like ``os.rename`` (replacing a file or an empty directory); directories move whole."""
        rs = self._resolve(src, follow=False)
        sn = self._need(rs, src)
        rd = self._resolve(dst, follow=False)
        self._writable_name(rs.rel, src)
        self._writable_name(rd.rel, dst)
        if rs.rel == rd.rel:
            return
        if rd.rel.startswith(rs.rel + "/"):
            raise OSError(errno.EINVAL, "cannot move a directory into itself", os.fsdecode(dst))
        dn = rd.node
        if sn.kind == "dir" and dn is not None:
            if dn.kind != "dir":
                raise path_error(errno.ENOTDIR, dst)
            if entries(dn):
                raise path_error(errno.ENOTEMPTY, dst)
        elif dn is not None and dn.kind == "dir":
            raise path_error(errno.EISDIR, dst)
        if sn.kind == "other":
            raise OSError(errno.EOPNOTSUPP, "cannot move a special file", os.fsdecode(src))
        self._up.move(rs, rd)
        if dn is not None and dn.kind == "file":
            record_replaced(self.metadir, rd.rel, by_tool=False)

    @_writes
    def chmod(self, path: StrPath, mode: int) -> None:
        r = self._resolve(path)
        node = self._need(r, path)
        self._up.record_base(r.rel)
        if node.kind == "dir":
            os.chmod(self._up.copy_up_dir(r.rel), mode)
            return
        if node.upper is None:
            self._up.copy_up_file(node.path, self._up.copy_up_dir(r.parent.rel), parent_of(r.rel)[1])
            node = self._need(self._resolve(path), path)
        os.chmod(node.path, mode)

    @_writes
    def symlink(self, target: str, path: StrPath) -> None:
        """Create symlink ``path`` -> ``target``; a target outside the project is refused."""
        r = self._resolve(path, follow=False)
        if r.node is not None:
            raise path_error(errno.EEXIST, path)
        name = self._writable_name(r.rel, path)
        check_link_target(self.lower, r.rel, target)
        udir = self._up.copy_up_dir(r.parent.rel)
        self._up.record_base(r.rel)
        self._up.clear_slot(udir, name)
        os.symlink(target, f"{udir}/{name}")

    # -- changes, promotion, lifecycle ----------------------------------------------------------------

    def changes(self) -> list[Change]:
        """What promotion would do to the real tree, computed from the upper layer on disk now."""
        self._rel(".")
        return compute_changes(self._lower_s, self._upper_s)

    def diff(self) -> str:
        """A unified diff (git style) of all changes."""
        return unified_diff(self._lower_s, self._upper_s, self.changes())

    def promote(
        self,
        paths: list[StrPath] | None = None,
        *,
        all_or_nothing: bool = True,
        durable: bool = True,
        lock_timeout: float = LOCK_TIMEOUT,
    ) -> PromoteResult:
        """Write the changes (all, or those at/under ``paths``) into the real tree; see docs/overlay.md.

        Raises PromoteError (an OSError naming the file) after rolling back when the write fails, Unsettled
        when not even that could be done (or an earlier acceptance of the project is still unsettled), and
        ProjectLocked when another process holds the project's promotion lock beyond ``lock_timeout``. A
        file the user changes while it is being promoted comes back as a conflict (nothing landed)."""
        rels = None if paths is None else [self._rel(p) for p in paths]
        if self.sandbox is not None:  # the kept mount would show the promoted layers stale
            self.sandbox.outdated()
        try:
            return promote(
                self, rels, all_or_nothing=all_or_nothing, durable=durable, lock_timeout=lock_timeout
            )
        finally:
            self._up.reload()

    def reads(self) -> dict[str, Identity]:
        """The read set: lower files the view served, with their identity when first read."""
        return load_identities(self.metadir, READS_FILE)

    def bases(self) -> dict[str, Identity]:
        """The conflict bases: what the real tree held at each changed path before its first change."""
        return load_identities(self.metadir, BASES_FILE)

    def statistics(self) -> OverlayStatistics:
        return self._up.statistics()

    def mounted(self, backend: str = "auto") -> AbstractContextManager[Path]:
        """Mount this overlay (FUSE or kernel overlayfs) for processes such as Bash; see overlayfs.mount."""
        from overlayfs.mount import mounted  # the mount backends are optional and heavier

        return mounted(self, backend)

    def discard(self) -> None:
        """Remove the layers (the private base dir, or upper/work/meta); the overlay is unusable after."""
        if self._discarded:
            return
        self._discarded = True
        self.close_sandbox()
        if self.layer is not None:  # the bounded filesystem goes with its last holder: O(1) here
            self.layer.close()
        if self._base is not None:  # deleted on a thread: accepting or aborting need not wait for it
            dispose(self._base, self._base.with_name(self._base.name + ".spent"))
            return
        for d in self._disk:
            shutil.rmtree(d, ignore_errors=True)

    def __enter__(self) -> Overlay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()

    def __repr__(self) -> str:
        return f"Overlay(lower={str(self.lower)!r}, upper={str(self.upper)!r})"
