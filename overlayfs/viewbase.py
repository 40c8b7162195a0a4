"""What :class:`overlayfs.view.Overlay` stands on: its opened layers and the lookup of a caller's path.

:class:`ViewBase` opens (or creates) the upper, work and meta directories of one overlay of a project,
rolls an interrupted promotion forward or back, and turns the paths callers give (relative to the project
root, absolute inside it, or through the root as spelled before symlinks were resolved) into nodes of the
merged view (:mod:`overlayfs.merged`), raising the ``OSError`` the kernel would for a missing entry, the
root or a name reserved by the layer format. The file API built on it lives in :mod:`overlayfs.view`.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from overlayfs.layer import WH_PREFIX
from overlayfs.merged import Node, Resolved, parent_of, resolve
from overlayfs.paths import PathEscapeError, to_relative
from overlayfs.recovery import Recovery, recover_journal
from overlayfs.state import new_overlay_dir, project_state
from overlayfs.upper import Upper

StrPath = str | os.PathLike[str]


def path_error(code: int, path: object) -> OSError:
    """The OSError subclass the kernel's ``code`` maps to, naming the path the caller gave."""
    return OSError(code, os.strerror(code), os.fsdecode(path) if isinstance(path, bytes | os.PathLike) else path)


class ViewBase:
    """The layers of one overlay of ``lower`` and the lookup of callers' paths in its merged view.

    See :class:`overlayfs.view.Overlay` for the arguments.
    """

    def __init__(self, lower: StrPath, upper: StrPath | None = None, *, workdir: StrPath | None = None,
                 metadir: StrPath | None = None) -> None:
        given = Path(lower)
        if not given.exists():
            raise FileNotFoundError(errno.ENOENT, "overlay lower directory does not exist", str(lower))
        if not given.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "overlay lower is not a directory", str(lower))
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
        for d in (up, work, meta):
            d.mkdir(parents=True, exist_ok=True)
        self.upper: Path = up.resolve()
        self.workdir: Path = work.resolve()
        self.metadir: Path = meta.resolve()
        for d in (self.upper, self.metadir):
            if d.is_relative_to(self.lower) or self.lower.is_relative_to(d):
                raise ValueError(f"overlay layer {d} and lower {self.lower} must not contain each other")
        self._lower_s = str(self.lower)
        self._upper_s = str(self.upper)
        self.recovery: Recovery | None = recover_journal(self.lower)
        self._up = Upper(self._lower_s, self._upper_s, self.metadir)
        self._discarded = False

    @property
    def root(self) -> Path:
        return self.lower

    @property
    def discarded(self) -> bool:
        return self._discarded

    def _rel(self, path: StrPath) -> str:
        if self._discarded:
            raise ValueError(f"overlay of {self.lower} was discarded")
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

    def _need(self, r: Resolved, path: StrPath) -> Node:
        if r.node is None:
            raise path_error(errno.ENOENT, path)
        return r.node

    def _writable_name(self, rel: str, path: StrPath) -> str:
        if rel == ".":
            raise path_error(errno.EBUSY, path)
        name = parent_of(rel)[1]
        if name.startswith(WH_PREFIX):
            raise OSError(errno.EINVAL, f"names starting with {WH_PREFIX!r} are reserved by the overlay "
                          "layer format", os.fsdecode(path))
        return name

    def _try_node(self, path: StrPath) -> Node | None:
        rel = self._rel(path)  # a path argument that escapes is an error, not "absent"
        try:
            return resolve(self._root_node(), self._lower_s, rel).node
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
