"""Request handlers on inodes and names for the merged view: thin wrappers around :class:`MergedTree`.

Handlers are written as plain methods doing syscalls inline (worker threads measured 2-3x slower) and
wrapped by :func:`~overlayfs.fuse.handles.guarded` so that no exception other than FUSEError reaches
the request loop (:mod:`overlayfs.fuse.server`). The handle tables and the requests on open handles (read, write, readdir, release) are in
:mod:`overlayfs.fuse.handles`.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat as stat_mod
from collections.abc import Callable, Sequence
from pathlib import Path

from overlayfs import layer
from overlayfs.fuse import wire
from overlayfs.fuse.external import external
from overlayfs.fuse.handles import TIMEOUT, HandleOps, entry_attributes, fuse_error, guarded
from overlayfs.fuse.tree import MergedTree, Node
from overlayfs.fuse.wire import Context, Entry, EntryAttributes

_HIDDEN_XATTR = (b"trusted.overlay.", b"user.overlay.")
_OPEN_STRIP = os.O_CREAT | os.O_EXCL | os.O_NOCTTY | getattr(os, "O_DIRECT", 0)

_HANDLERS = (
    "lookup",
    "forget",
    "getattr",
    "setattr",
    "readlink",
    "readdir",
    "readdir_names",
    "mkdir",
    "rmdir",
    "unlink",
    "symlink",
    "rename",
    "link",
    "read",
    "write",
    "fsync",
    "statfs",
    "getxattr",
    "setxattr",
    "listxattr",
    "removexattr",
    "mknod",
)


class OverlayOps(HandleOps):
    """The merged view of ``lower`` + ``upper`` in the shared layer format."""

    enable_writeback_cache = False  # it hurts small appends, and keep_cache already gives reuse

    def __init__(self, lower: Path, upper: Path, metadir: Path, workdir: Path | None = None) -> None:
        super().__init__(MergedTree(lower, upper, metadir, workdir))
        # Set by the server: drop what the kernel caches of an inode (attributes only: True) or of a name.
        self.invalidate_inode: Callable[[int, bool], None] | None = None
        self.invalidate_entry: Callable[[int, bytes], None] | None = None

    def external_changes(self, paths: list[str]) -> Callable[[], None]:
        """The upper layer's entries at ``paths`` were changed by another writer (the pure view, while no
        command ran): re-resolve them now; returns what drops the kernel's caches of them, to be run outside
        the request loop (a notification may wait for a lock a request holds)."""
        entries, attrs = external(self.tree, paths)

        entry_fn, inode_fn = self.invalidate_entry, self.invalidate_inode

        def notify() -> None:
            if entry_fn is None or inode_fn is None:
                return
            for ino, name in entries:
                entry_fn(ino, os.fsencode(name))
            for ino in attrs:  # directories: attributes and the listing the kernel may have cached
                inode_fn(ino, False)

        return notify

    # -- helpers -------------------------------------------------------------------------------------
    def _stat(self, node: Node) -> os.stat_result:
        if node.parent is None and node is not self.tree.root:  # unlinked but still open
            return self.files.stat_gone(node)
        return os.lstat(self.tree.backing(node))

    def _child(self, parent_ino: int, name: bytes) -> tuple[Node, os.stat_result]:
        hit = self.tree.child(self.tree.get(parent_ino), os.fsdecode(name))
        if hit is None:
            raise fuse_error(errno.ENOENT)
        return hit

    def _entry(self, node: Node) -> Entry:
        node.lookups += 1
        return entry_attributes(node, os.lstat(self.tree.upath(node)))

    def _own(self, path: str, ctx: Context) -> None:
        if ctx.uid != os.geteuid() or ctx.gid != os.getegid():
            os.chown(path, ctx.uid, ctx.gid, follow_symlinks=False)

    # -- lookup and attributes -----------------------------------------------------------------------
    def lookup(self, parent_inode: int, name: bytes, ctx: Context) -> Entry:
        hit = self.tree.child(self.tree.get(parent_inode), os.fsdecode(name))
        if hit is None:  # a cached negative entry: the kernel drops it when we create the name
            a = EntryAttributes()
            a.st_ino = 0
            a.entry_timeout = TIMEOUT
            return a
        node, st = hit
        node.lookups += 1
        return entry_attributes(node, st)

    def forget(self, inode_list: Sequence[tuple[int, int]]) -> None:
        for ino, n in inode_list:
            node = self.tree.nodes.get(ino)
            if node is not None:
                self.tree.forget(node, n)

    def getattr(self, inode: int, ctx: Context) -> Entry:
        node = self.tree.get(inode)
        return entry_attributes(node, self._stat(node))

    def setattr(
        self, inode: int, attr: EntryAttributes, fields: wire.SetattrFields, fh: int | None, ctx: Context
    ) -> Entry:
        node = self.tree.get(inode)
        target: int | str
        if node.parent is None and node is not self.tree.root:
            kept = self.files.upper(node)  # never the lower file's: that is the real project's
            if kept is None:
                raise fuse_error(errno.ENOENT)
            target = kept
        else:
            if not node.upper:
                self.tree.copy_up(node, data=not (fields.update_size and attr.st_size == 0))
            self.tree.touch(node)
            target = self.tree.upath(node)
        is_link = isinstance(target, str) and stat_mod.S_ISLNK(os.lstat(target).st_mode)
        if fields.update_size:
            os.truncate(target, attr.st_size)
        if fields.update_mode and not is_link:
            os.chmod(target, stat_mod.S_IMODE(attr.st_mode))
        if fields.update_uid or fields.update_gid:
            os.chown(
                target,
                attr.st_uid if fields.update_uid else -1,
                attr.st_gid if fields.update_gid else -1,
                follow_symlinks=isinstance(target, int),
            )
        if fields.update_atime or fields.update_mtime:
            st = os.stat(target) if isinstance(target, int) else os.lstat(target)
            times = (
                attr.st_atime_ns if fields.update_atime else st.st_atime_ns,
                attr.st_mtime_ns if fields.update_mtime else st.st_mtime_ns,
            )
            if isinstance(target, int):
                os.utime(target, ns=times)
            else:
                os.utime(target, ns=times, follow_symlinks=False)
        st = os.fstat(target) if isinstance(target, int) else os.lstat(target)
        return entry_attributes(node, st)

    def readlink(self, inode: int, ctx: Context) -> bytes:
        node = self.tree.get(inode)
        if node.link is not None and node.parent is None:  # a symlink whose name was removed
            return node.link
        return os.readlink(os.fsencode(self.tree.backing(node)))

    def statfs(self, ctx: Context) -> wire.StatvfsData:
        sv = os.statvfs(self.tree.upper_s)
        out = wire.StatvfsData()
        for f in (
            "f_bsize",
            "f_frsize",
            "f_blocks",
            "f_bfree",
            "f_bavail",
            "f_files",
            "f_ffree",
            "f_favail",
            "f_namemax",
        ):
            setattr(out, f, getattr(sv, f))
        return out

    # -- names ---------------------------------------------------------------------------------------
    def mkdir(self, parent_inode: int, name: bytes, mode: int, ctx: Context) -> Entry:
        parent, sname = self.tree.get(parent_inode), os.fsdecode(name)
        if self.tree.child(parent, sname) is not None:
            raise fuse_error(errno.EEXIST)
        path, replaces = self.tree.prepare_new(parent, sname)
        os.mkdir(path, mode & ~ctx.umask)
        if replaces:
            layer.make_opaque(Path(path))
        self._own(path, ctx)
        return self._entry(self.tree.new_node(parent, sname, is_dir=True, replaces_lower=replaces))

    def rmdir(self, parent_inode: int, name: bytes, ctx: Context) -> None:
        node, st = self._child(parent_inode, name)
        if not stat_mod.S_ISDIR(st.st_mode):
            raise fuse_error(errno.ENOTDIR)
        if not self.tree.is_empty(node):
            raise fuse_error(errno.ENOTEMPTY)
        self.files.keep(node, st)  # a directory: only its attributes (a shell's cwd may stay in it)
        self.tree.remove(node)

    def unlink(self, parent_inode: int, name: bytes, ctx: Context) -> None:
        node, st = self._child(parent_inode, name)
        if stat_mod.S_ISDIR(st.st_mode):
            raise fuse_error(errno.EISDIR)
        self.files.keep(node, st)  # open descriptors outlive the name, as on a real filesystem
        self.tree.remove(node)

    def symlink(self, parent_inode: int, name: bytes, target: bytes, ctx: Context) -> Entry:
        parent, sname = self.tree.get(parent_inode), os.fsdecode(name)
        if self.tree.child(parent, sname) is not None:
            raise fuse_error(errno.EEXIST)
        path, replaces = self.tree.prepare_new(parent, sname)
        os.symlink(target, path)
        self._own(path, ctx)
        return self._entry(self.tree.new_node(parent, sname, is_dir=False, replaces_lower=replaces))

    def mknod(self, parent_inode: int, name: bytes, mode: int, rdev: int, ctx: Context) -> Entry:
        parent, sname = self.tree.get(parent_inode), os.fsdecode(name)
        if self.tree.child(parent, sname) is not None:
            raise fuse_error(errno.EEXIST)
        if stat_mod.S_ISCHR(mode) and rdev == 0:
            raise fuse_error(errno.EPERM)  # a 0/0 device is a whiteout in the layer format
        path, replaces = self.tree.prepare_new(parent, sname)
        os.mknod(path, mode & ~ctx.umask, rdev)
        self._own(path, ctx)
        return self._entry(self.tree.new_node(parent, sname, is_dir=False, replaces_lower=replaces))

    def link(self, inode: int, new_parent_inode: int, new_name: bytes, ctx: Context) -> Entry:
        node = self.tree.get(inode)
        parent, sname = self.tree.get(new_parent_inode), os.fsdecode(new_name)
        if node.is_dir:
            raise fuse_error(errno.EPERM)
        if self.tree.child(parent, sname) is not None:
            raise fuse_error(errno.EEXIST)
        self.tree.copy_up(node)
        path, replaces = self.tree.prepare_new(parent, sname)
        os.link(self.tree.upath(node), path, follow_symlinks=False)
        if self.invalidate_inode is not None:  # the kernel caches the old name's attributes (nlink 1)
            # Before replying, not from a thread later: a read through the old name right after a write
            # through the new one raced the invalidation and saw the old size. Invalidating attributes only
            # takes no lock the kernel may hold for this request (pages would), so it is safe inline.
            self.invalidate_inode(node.ino, True)
        # The new name is its own inode here: hard links share data in the upper layer, not inode numbers.
        return self._entry(self.tree.new_node(parent, sname, is_dir=False, replaces_lower=replaces))

    def rename(
        self,
        parent_inode_old: int,
        name_old: bytes,
        parent_inode_new: int,
        name_new: bytes,
        flags: int,
        ctx: Context,
    ) -> None:
        if flags & ~wire.RENAME_NOREPLACE:  # RENAME_EXCHANGE, RENAME_WHITEOUT: not served
            raise fuse_error(errno.EINVAL)
        tree = self.tree
        node, sst = self._child(parent_inode_old, name_old)
        newp, nname = tree.get(parent_inode_new), os.fsdecode(name_new)
        dst = tree.child(newp, nname)
        src_dir = stat_mod.S_ISDIR(sst.st_mode)
        if dst is not None:
            dnode, dst_st = dst
            if dnode is node:
                return
            if flags & wire.RENAME_NOREPLACE:
                raise fuse_error(errno.EEXIST)
            if stat_mod.S_ISDIR(dst_st.st_mode):
                if not src_dir:
                    raise fuse_error(errno.EISDIR)
                if not tree.is_empty(dnode):
                    raise fuse_error(errno.ENOTEMPTY)
            elif src_dir:
                raise fuse_error(errno.ENOTDIR)
        if src_dir and (not node.upper or node.lower_children):
            raise fuse_error(errno.EXDEV)  # as kernel overlayfs without redirect_dir: callers copy instead
        p: Node | None = newp
        while p is not None:  # no moving a directory into itself
            if p is node:
                raise fuse_error(errno.EINVAL)
            p = p.parent
        tree.copy_up(node)
        tree.touch(node)
        if dst is not None:
            self.files.keep(*dst)  # replaced: open descriptors of it outlive the name
        new_path, dest_lower = tree.prepare_new(newp, nname)
        if dst is not None and dst[0].upper and dst[0].is_dir:
            shutil.rmtree(tree.upath(dst[0]))
        old_parent = node.parent
        if old_parent is None:  # the root: the kernel refuses first, but the rename below must not run
            raise fuse_error(errno.EBUSY)
        os.rename(tree.upath(node), new_path)
        if node.lower:  # the lower entry at the old name would show through again
            layer.make_whiteout(Path(tree.upath(old_parent)), node.name)
        if src_dir and dest_lower:
            layer.make_opaque(Path(new_path))
        tree.move(node, newp, nname, lower_at_dest=dest_lower)

    # -- files ---------------------------------------------------------------------------------------
    # -- xattrs (passthrough; the overlay's own markers are hidden) -----------------------------------
    def getxattr(self, inode: int, name: bytes, ctx: Context) -> bytes:
        if name.startswith(_HIDDEN_XATTR):
            raise fuse_error(wire.ENOATTR)
        try:
            where = self.where(self.tree.get(inode))
            return os.getxattr(where, name, follow_symlinks=isinstance(where, int))
        except OSError as e:
            raise fuse_error(wire.ENOATTR if e.errno == errno.ENODATA else e.errno or errno.EIO) from None

    def listxattr(self, inode: int, ctx: Context) -> Sequence[bytes]:
        where = self.where(self.tree.get(inode))
        names = os.listxattr(where, follow_symlinks=isinstance(where, int))
        return [os.fsencode(n) for n in names if not os.fsencode(n).startswith(_HIDDEN_XATTR)]

    def setxattr(self, inode: int, name: bytes, value: bytes, ctx: Context) -> None:
        if name.startswith(_HIDDEN_XATTR):
            raise fuse_error(errno.EPERM)
        where = self.changing(self.tree.get(inode))
        os.setxattr(where, name, value, follow_symlinks=isinstance(where, int))

    def removexattr(self, inode: int, name: bytes, ctx: Context) -> None:
        if name.startswith(_HIDDEN_XATTR):
            raise fuse_error(wire.ENOATTR)
        where = self.changing(self.tree.get(inode))
        os.removexattr(where, name, follow_symlinks=isinstance(where, int))


for _name in _HANDLERS:
    setattr(OverlayOps, _name, guarded(getattr(OverlayOps, _name)))
