"""The merged tree the FUSE server serves: inode table, per-node layer state, copy-up, merged listings.

Everything here is synchronous syscalls on the lower and upper directories in the layer format of
:mod:`overlayfs.layer`; the FUSE handlers in :mod:`overlayfs.fuse.ops` are thin wrappers around it. The
server is the only writer of the view while mounted, so each node caches which layers it lives in.
Copying a file's bytes up is :mod:`overlayfs.fuse.copyfile`'s.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat as stat_mod
from collections.abc import Callable
from pathlib import Path

from overlayfs import layer
from overlayfs.fuse.copyfile import copy_file
from overlayfs.fuse.records import Records

ROOT_INO = 1


class Node:
    """One inode of the merged view. ``upper``: has a real upper entry; ``lower``: a lower entry exists at
    this path and is not hidden by a whiteout or an opaque ancestor; ``opaque``: (upper dir) lower children
    hidden."""

    __slots__ = (
        "gone",
        "ino",
        "is_dir",
        "kept",
        "kids",
        "link",
        "listing",
        "lookups",
        "lower",
        "name",
        "opaque",
        "parent",
        "rfd",
        "rfd_upper",
        "upper",
        "wfd",
    )

    def __init__(
        self,
        ino: int,
        parent: Node | None,
        name: str,
        *,
        upper: bool,
        lower: bool,
        opaque: bool,
        is_dir: bool,
    ) -> None:
        self.ino = ino
        self.parent = parent
        self.name = name
        self.upper = upper
        self.lower = lower
        self.opaque = opaque
        self.is_dir = is_dir
        self.lookups = 0
        self.kids: dict[str, Node] = {}  # children currently in the table, by name
        # Descriptors to read and write it through (overlayfs.fuse.files), the layer the reader was opened
        # on, and whether they are kept until the kernel forgets the node (its name was removed).
        self.rfd = self.wfd = -1
        self.rfd_upper = self.kept = False
        self.listing: list[tuple[str, bool]] | None = None  # a directory's merged listing, while read
        # Once its name is removed while the kernel still holds it: its lstat then, and a symlink's target
        # (what GETATTR and READLINK answer when no descriptor was kept: directories, symlinks, FIFOs).
        self.gone: os.stat_result | None = None
        self.link: bytes | None = None

    @property
    def lower_children(self) -> bool:
        """Whether lower entries can show through beneath this directory."""
        return self.lower and not self.opaque


class MergedTree:
    """Inode table plus the layer operations that keep the upper layer in the shared format."""

    def __init__(self, lower: Path, upper: Path, metadir: Path, workdir: Path | None = None) -> None:
        self.lower_s = os.fspath(lower)
        self.upper_s = os.fspath(upper)
        # Where a copy-up is staged when the upper filesystem has no O_TMPFILE: the overlay's work dir
        # (on the upper's filesystem), never a name in the view.
        self.work_s = os.fspath(workdir) if workdir is not None else None
        self.lower = Path(lower)
        self.metadir = Path(metadir)
        root = Node(ROOT_INO, None, "", upper=True, lower=True, opaque=layer.is_opaque(upper), is_dir=True)
        root.lookups = 1 << 40  # never forgotten
        self.nodes: dict[int, Node] = {ROOT_INO: root}
        self.root = root
        self._next_ino = ROOT_INO + 1
        self.on_forget: Callable[[Node], None] | None = None  # a node left the table: close its descriptors
        # First record per path wins when loading, so one record per path per server is enough.
        self._based = set(layer.load_identities(self.metadir, layer.BASES_FILE))
        self._read = set(layer.load_identities(self.metadir, layer.READS_FILE))
        self.records = Records(self.metadir, self.upper_s, self.work_s)  # counted against the layer's bound

    # -- paths ---------------------------------------------------------------------------------------
    def rel(self, node: Node) -> str:
        """``node``'s path relative to the layers; ENOENT for a node whose name was removed (a path of the
        layers' root instead would make a request on it act on the root)."""
        parts: list[str] = []
        while node.parent is not None:
            parts.append(node.name)
            node = node.parent
        if node is not self.root:
            raise OSError(errno.ENOENT, "the node's name was removed")
        return "/".join(reversed(parts))

    def upath(self, node: Node) -> str:
        rel = self.rel(node)
        return f"{self.upper_s}/{rel}" if rel else self.upper_s

    def lpath(self, node: Node) -> str:
        rel = self.rel(node)
        return f"{self.lower_s}/{rel}" if rel else self.lower_s

    def backing(self, node: Node) -> str:
        return self.upath(node) if node.upper else self.lpath(node)

    # -- inode table ---------------------------------------------------------------------------------
    def get(self, ino: int) -> Node:
        try:
            return self.nodes[ino]
        except KeyError:
            raise OSError(errno.ENOENT, "stale inode") from None

    def forget(self, node: Node, n: int) -> None:
        node.lookups -= n
        self._maybe_drop(node)

    def _maybe_drop(self, node: Node) -> None:
        # A node stays while the kernel holds it or a child still names it (its descriptors go with it).
        while node.lookups <= 0 and not node.kids and node.ino != ROOT_INO:
            self._pop(node)
            parent = node.parent
            if parent is None:
                return
            if parent.kids.get(node.name) is node:
                del parent.kids[node.name]
            node.parent = None
            node = parent

    def detach(self, node: Node) -> None:
        """The node's name is gone from the view (unlink, rmdir, replaced by rename)."""
        parent = node.parent
        if parent is not None and parent.kids.get(node.name) is node:
            del parent.kids[node.name]
        node.parent = None
        if node.lookups <= 0:
            self._pop(node)
        if parent is not None:
            self._maybe_drop(parent)

    def _pop(self, node: Node) -> None:
        if self.nodes.pop(node.ino, None) is not None and self.on_forget is not None:
            self.on_forget(node)

    def _add(self, parent: Node, name: str, *, upper: bool, lower: bool, opaque: bool, is_dir: bool) -> Node:
        node = Node(self._next_ino, parent, name, upper=upper, lower=lower, opaque=opaque, is_dir=is_dir)
        self._next_ino += 1
        self.nodes[node.ino] = node
        parent.kids[name] = node
        return node

    # -- resolution ----------------------------------------------------------------------------------
    def dir_paths(self, node: Node) -> tuple[str, str]:
        """A directory's upper and lower paths (for :meth:`child` over many of its names)."""
        rel = self.rel(node)
        return (f"{self.upper_s}/{rel}", f"{self.lower_s}/{rel}") if rel else (self.upper_s, self.lower_s)

    def child(
        self, parent: Node, name: str, paths: tuple[str, str] | None = None
    ) -> tuple[Node, os.stat_result] | None:
        """Resolve ``name`` in ``parent`` in the merged view: the node and the lstat of its backing file.
        ``paths``: the parent's :meth:`dir_paths`, when the caller has them."""
        upath, lpath = paths or self.dir_paths(parent)
        node = parent.kids.get(name)
        if node is not None:
            return node, os.lstat(f"{upath if node.upper else lpath}/{name}")
        ust = None
        if parent.upper:
            up = f"{upath}/{name}"
            try:
                ust = os.lstat(up)
            except FileNotFoundError:
                pass
            else:
                if layer.is_whiteout_at(up, ust):
                    return None
        lst = lexists_stat(f"{lpath}/{name}") if parent.lower_children else None
        if ust is None and lst is None:
            return None
        st = ust if ust is not None else lst
        assert st is not None
        is_dir = stat_mod.S_ISDIR(st.st_mode)
        opaque = ust is not None and is_dir and layer.is_opaque(f"{upath}/{name}")
        # An upper non-directory over a lower entry, or an upper dir over a lower non-dir, replaces it.
        node = self._add(
            parent,
            name,
            upper=ust is not None,
            lower=lst is not None,
            opaque=opaque or (ust is not None and lst is not None and not stat_mod.S_ISDIR(lst.st_mode)),
            is_dir=is_dir,
        )
        if ust is None and st.st_size == 0 and stat_mod.S_ISREG(st.st_mode):
            # Read through the mount, an empty file costs no READ (the kernel knows its size): what a
            # command can learn of it, it learns here, so it goes into the read set here.
            self.note_read(f"{self.rel(parent)}/{name}" if parent.parent is not None else name, st)
        return node, st

    def listing(self, node: Node) -> list[tuple[str, bool]]:
        """The merged directory listing, built once per opendir: (name, in_upper) pairs."""
        out: dict[str, bool] = {}
        hidden: set[str] = set()
        if node.upper:
            with os.scandir(self.upath(node)) as it:
                for e in it:
                    name = e.name
                    if not (e.is_dir(follow_symlinks=False) or e.is_symlink()) and layer.is_whiteout_at(
                        e.path, e.stat(follow_symlinks=False)
                    ):
                        hidden.add(name)
                        continue
                    out[name] = True
        if node.lower_children:
            with os.scandir(self.lpath(node)) as it:
                for e in it:
                    if e.name not in out and e.name not in hidden:
                        out[e.name] = False
        return list(out.items())

    def is_empty(self, node: Node) -> bool:
        return not self.listing(node)

    # -- bookkeeping for promotion -------------------------------------------------------------------
    def touch(self, node_or_rel: Node | str) -> None:
        """Record the lower identity of a path before the view first changes it (the conflict base)."""
        rel = node_or_rel if isinstance(node_or_rel, str) else self.rel(node_or_rel)
        if rel and rel not in self._based:
            if lexists_stat(f"{self.lower_s}/{rel}") is None:  # a new name (most creates): no hash to take
                ident = layer.Identity(rel, False)
            else:
                ident = layer.Identity.of(self.lower, rel)
            self.records.append(layer.BASES_FILE, ident)  # ENOSPC: the change is refused, as its write
            self._based.add(rel)

    def note_read(self, node: Node | str, st: os.stat_result) -> None:
        """Record a lower file read (``node``, or its relative path): at its first READ (an empty one when it is
        first looked up, since it gets no READ). No content hash: hashing
        doubled the cost of a first read; promotion compares (size, mtime_ns, inode) when a record has none."""
        rel = node if isinstance(node, str) else self.rel(node)
        if rel not in self._read:
            self.records.append(
                layer.READS_FILE,
                layer.Identity(rel, True, "file", st.st_size, st.st_mtime_ns, st.st_ino, None),
            )
            self._read.add(rel)

    # -- copy-up -------------------------------------------------------------------------------------
    def copy_up(self, node: Node, *, data: bool = True) -> None:
        """Give ``node`` an upper entry (parents first). ``data=False`` for an about-to-be-truncated file."""
        if node.upper:
            return
        assert node.parent is not None
        self.copy_up(node.parent)
        lp, up = self.lpath(node), self.upath(node)
        st = os.lstat(lp)
        if stat_mod.S_ISDIR(st.st_mode):
            os.mkdir(up, stat_mod.S_IMODE(st.st_mode))
            os.chmod(up, stat_mod.S_IMODE(st.st_mode))  # mkdir applied this server's umask: the lower's mode
        else:
            self.touch(node)
            if stat_mod.S_ISLNK(st.st_mode):
                os.symlink(os.readlink(lp), up)
            elif stat_mod.S_ISREG(st.st_mode):
                copy_file(lp, up, st, data=data, work=self.work_s)
            else:
                os.mknod(up, st.st_mode, st.st_rdev)
        os.chown(up, st.st_uid, st.st_gid, follow_symlinks=False)
        os.utime(up, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)
        node.upper = True

    def prepare_new(self, parent: Node, name: str) -> tuple[str, bool]:
        """Make room for a new upper entry ``name`` in ``parent``: returns (upper path, replaces_lower)."""
        self.copy_up(parent)
        self.touch(_join(self.rel(parent), name))
        pup, lp = self.dir_paths(parent)
        replaces = parent.lower_children and lexists_stat(f"{lp}/{name}") is not None
        up = f"{pup}/{name}"
        st = lexists_stat(up)
        if st is not None and layer.is_whiteout_at(up, st):
            os.unlink(up)
        return up, replaces

    def new_node(self, parent: Node, name: str, *, is_dir: bool, replaces_lower: bool) -> Node:
        old = parent.kids.get(name)
        if old is not None:
            self.detach(old)
        return self._add(
            parent, name, upper=True, lower=replaces_lower, opaque=is_dir and replaces_lower, is_dir=is_dir
        )

    def move(self, node: Node, parent: Node, name: str, *, lower_at_dest: bool) -> None:
        old = parent.kids.get(name)
        if old is not None and old is not node:
            self.detach(old)
        src_parent = node.parent
        assert src_parent is not None
        if src_parent.kids.get(node.name) is node:
            del src_parent.kids[node.name]
        node.parent, node.name = parent, name
        parent.kids[name] = node
        node.lower = lower_at_dest
        if node.is_dir and lower_at_dest:
            node.opaque = True
        self._maybe_drop(src_parent)

    def remove(self, node: Node) -> None:
        """Delete ``node`` from the view (unlink or rmdir semantics checked by the caller)."""
        parent = node.parent
        assert parent is not None
        self.touch(node)
        if node.upper:
            up = self.upath(node)
            if node.is_dir:
                shutil.rmtree(up)  # holds only whiteouts and markers: the merged dir was empty
            else:
                os.unlink(up)
        if node.lower:
            self.copy_up(parent)
            layer.make_whiteout(Path(self.upath(parent)), node.name)
        self.detach(node)


def _join(rel: str, name: str) -> str:
    return f"{rel}/{name}" if rel else name


def lexists_stat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
