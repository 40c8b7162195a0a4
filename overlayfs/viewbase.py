"""What :class:`overlayfs.view.Overlay` stands on: its opened layers and the lookup of a caller's path.

:class:`ViewBase` opens (or creates) the upper, work and meta directories of one overlay of a project,
rolls an interrupted promotion forward or back, and turns the paths callers give (relative to the project
root, absolute inside it, or through the root as spelled before symlinks were resolved) into nodes of the
merged view (:mod:`overlayfs.merged`), raising the ``OSError`` the kernel would for a missing entry or
the root. With a bound, the upper and work directories live on a bounded filesystem
(:mod:`overlayfs.bounded`) and only ``meta/`` on disk. The file API built on it lives in :mod:`overlayfs.view`.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

from overlayfs.bounded import BoundedLayer, LayerBound
from overlayfs.merged import Node, Resolved, kind_of, parent_of, resolve
from overlayfs.paths import PathEscapeError, to_relative
from overlayfs.recovery import Recovery, recover_journal
from overlayfs.state import new_overlay_dir, project_state
from overlayfs.upper import Upper

StrPath = str | os.PathLike[str]
LOOKUP_CACHE_MAX = 20_000  # cached lookups per overlay; past it the cache starts again empty


def path_error(code: int, path: object) -> OSError:
    """The OSError subclass the kernel's ``code`` maps to, naming the path the caller gave."""
    return OSError(
        code, os.strerror(code), os.fsdecode(path) if isinstance(path, bytes | os.PathLike) else path
    )


class ViewBase:
    """The layers of one overlay of ``lower`` and the lookup of callers' paths in its merged view.

    See :class:`overlayfs.view.Overlay` for the arguments.
    """

    def __init__(
        self,
        lower: StrPath,
        upper: StrPath | None = None,
        *,
        workdir: StrPath | None = None,
        metadir: StrPath | None = None,
        bound: LayerBound | None = None,
    ) -> None:
        given = Path(lower)
        if not given.exists():
            raise FileNotFoundError(errno.ENOENT, "overlay lower directory does not exist", str(lower))
        if not given.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "overlay lower is not a directory", str(lower))
        if bound is not None and upper is not None:
            raise ValueError("a bounded overlay makes its own upper layer: give bound or upper, not both")
        self.lower: Path = given.resolve()
        self._aliases = [a for a in {os.path.abspath(given)} if a != str(self.lower)]
        if upper is None:
            self._base: Path | None = new_overlay_dir(project_state(self.lower))
            up, work, meta = self._base / "upper", self._base / "work", self._base / "meta"
        else:
            self._base = None
            up = Path(upper).absolute()
            work = Path(workdir).absolute() if workdir is not None else up.parent / "work"
            meta = Path(metadir).absolute() if metadir is not None else up.parent / "meta"
        self.layer: BoundedLayer | None = None
        if bound is not None:  # only meta/ on disk; upper/ and work/ on the bounded filesystem
            meta.mkdir(parents=True, exist_ok=True)
            self.metadir: Path = meta.resolve()
            self._open_layer(bound)
        else:
            for d in (up, work, meta):
                d.mkdir(parents=True, exist_ok=True)
            # A layer given as /proc/<pid>/fd/<n>/upper (a bounded one, reopened) must not be resolved:
            # the magic link reads as "/" (its meta/ resolved to the host's /meta).
            self.upper: Path = up if up.is_relative_to("/proc") else up.resolve()
            self.workdir: Path = work if work.is_relative_to("/proc") else work.resolve()
            self.metadir = meta if meta.is_relative_to("/proc") else meta.resolve()
        self._disk = [self.upper, self.workdir, self.metadir] if self._base is None else []
        for d in (self.upper, self.metadir):
            if d.is_relative_to(self.lower) or self.lower.is_relative_to(d):
                raise ValueError(f"overlay layer {d} and lower {self.lower} must not contain each other")
        self._lower_s = str(self.lower)
        self.recovery: Recovery | None = recover_journal(self.lower)
        # Lookups of existing paths, by the caller's path string and whether the last link is followed:
        # valid until the upper layer changes (this view's writes, a sandboxed command, a mount closing: see
        # upper_changed). What they serve is read fresh from disk (open, lstat); only the walk is skipped.
        self._lookups: dict[tuple[str, bool], Resolved] = {}
        self._attach_upper()
        self._discarded = False
        # The mounted view this overlay's sandboxed commands share (overlayfs.sandbox.session), told before
        # this view writes the upper layer behind it, and closed with the overlay or before a promotion.
        self.sandbox: Any = None

    def _before_write(self) -> None:
        """Every method that writes the upper layer calls this first (and :meth:`upper_changed` after)."""
        self._lookups.clear()
        if self.sandbox is not None:
            self.sandbox.before_view_write()

    def upper_changed(self) -> None:
        """The upper layer was written by someone else (a sandboxed command, a mount): forget cached lookups.
        A process that writes the layer through a mount it keeps open must call this before reading here."""
        self._lookups.clear()

    def close_sandbox(self) -> None:
        """Unmount the view the sandboxed commands shared (a later command mounts afresh)."""
        held, self.sandbox = self.sandbox, None
        if held is not None:
            held.close()

    def _open_layer(self, bound: LayerBound) -> None:
        self.layer = BoundedLayer(bound)
        self.upper, self.workdir = Path(self.layer.upper), Path(self.layer.work)

    def _attach_upper(self) -> None:
        self._lookups.clear()
        self._upper_s = str(self.upper)
        self._up = Upper(
            self._lower_s, self._upper_s, self.metadir, tmp=self.layer.tmp if self.layer is not None else None
        )

    @property
    def bound(self) -> LayerBound | None:
        """The upper layer's bound, or None when it lives unbounded on the state dir's filesystem."""
        return self.layer.bound if self.layer is not None else None

    def make_bounded(self, bound: LayerBound) -> None:
        """Move an unbounded overlay whose upper layer is still empty onto a bounded filesystem (what the
        sandbox does before a command). The directories it had on disk stay, empty, until :meth:`discard`."""
        if self.layer is not None:
            return
        self._rel(".")  # refuses a discarded overlay
        if os.listdir(self.upper):
            raise ValueError(
                f"the overlay's upper layer {self.upper} already holds changes: it can only be "
                "bounded when made (Overlay(lower, bound=...))"
            )
        self._open_layer(bound)
        self._attach_upper()

    @property
    def root(self) -> Path:
        return self.lower

    @property
    def discarded(self) -> bool:
        return self._discarded

    def _rel(self, path: StrPath) -> str:
        if self._discarded:
            raise ValueError(f"overlay of {self.lower} was discarded")
        if type(path) is str and _plain(path):  # the common spelling, without PurePosixPath's cost
            return path
        try:
            return to_relative(self.lower, path)
        except PathEscapeError:
            for alias in self._aliases:  # the root as the caller spelled it, before symlinks were resolved
                try:
                    return to_relative(Path(alias), path)
                except PathEscapeError:
                    pass
            raise

    def _root_node(self) -> Node:
        return Node(".", "dir", self._upper_s, self._lower_s, os.lstat(self._upper_s))

    def _resolve(self, path: StrPath, *, follow: bool = True) -> Resolved:
        rel = self._rel(path)  # first: it refuses a discarded overlay
        return resolve(self._root_node(), self._lower_s, rel, follow_last=follow)

    def _lookup(self, path: StrPath, *, follow: bool = True) -> tuple[Resolved, bool]:
        """:meth:`_resolve` through the cache of existing paths; also whether the walk was made just now
        (its stat results are then fresh)."""
        key = (path, follow) if type(path) is str else None
        if key is not None:
            hit = self._lookups.get(key)
            if hit is not None:
                return hit, False
        r = self._resolve(path, follow=follow)
        if key is not None and r.node is not None:
            if len(self._lookups) >= LOOKUP_CACHE_MAX:
                self._lookups.clear()
            self._lookups[key] = r
        return r, True

    def _need(self, r: Resolved, path: StrPath) -> Node:
        if r.node is None:
            raise path_error(errno.ENOENT, path)
        return r.node

    def _writable_name(self, rel: str, path: StrPath) -> str:
        if rel == ".":
            raise path_error(errno.EBUSY, path)
        return parent_of(rel)[1]

    def _try_node(self, path: StrPath) -> Node | None:
        rel = self._rel(path)  # a path argument that escapes is an error, not "absent"
        try:
            r, fresh = self._lookup(rel)
            if not fresh and r.node is not None and not _still(r.node):
                self._lookups.clear()  # the real tree changed under a cached lookup: walk again
                r, _ = self._lookup(rel)
            return r.node
        except (FileNotFoundError, NotADirectoryError, PathEscapeError):
            return None
        except OSError as e:
            if e.errno == errno.ELOOP:
                return None
            raise

    def _link_is_dir(self, rel: str) -> bool:
        try:
            node = resolve(self._root_node(), self._lower_s, rel).node
        except (OSError, ValueError):
            return False
        return node is not None and node.kind == "dir"


def _still(node: Node) -> bool:
    """Whether a cached node's serving entry is still there, of the same kind."""
    try:
        return kind_of(os.lstat(node.path).st_mode) == node.kind
    except OSError:
        return False


def _plain(path: str) -> bool:
    """Whether ``path`` is already the canonical relative form (``a/b``: no ``.``, ``..``, ``//``, no
    leading or trailing slash)."""
    if not path or path[0] == "/" or path[-1] == "/" or "//" in path:
        return False
    if "." not in path:
        return True
    parts = path.split("/")
    return "." not in parts and ".." not in parts
