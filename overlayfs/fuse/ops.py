"""pyfuse3 request handlers on inodes and names for the merged view: thin wrappers around :class:`MergedTree`.

Handlers are written as plain methods doing syscalls inline (worker threads measured 2-3x slower) and
wrapped by :func:`~overlayfs.fuse.handles.guarded` so that no exception other than FUSEError reaches
pyfuse3. The handle tables and the requests on open handles (read, write, readdir, release) are in
:mod:`overlayfs.fuse.handles`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat as stat_mod
from collections.abc import Callable, Sequence
from pathlib import Path

import pyfuse3

from overlayfs import layer
from overlayfs.fuse.handles import TIMEOUT, HandleOps, entry_attributes, fuse_error, guarded
from overlayfs.fuse.tree import MergedTree, Node

_HIDDEN_XATTR = (b"trusted.overlay.", b"user.overlay.")
_OPEN_STRIP = os.O_CREAT | os.O_EXCL | os.O_NOCTTY | getattr(os, "O_DIRECT", 0)

_HANDLERS = (
    "lookup", "forget", "getattr", "setattr", "readlink", "opendir", "readdir", "releasedir", "mkdir",
    "rmdir", "unlink", "symlink", "rename", "link", "open", "create", "read", "write", "flush", "release",
    "fsync", "fsyncdir", "statfs", "getxattr", "setxattr", "listxattr", "removexattr", "access", "mknod",
)


class OverlayOps(HandleOps):
    """The merged view of ``lower`` + ``upper`` in the shared layer format."""

    enable_writeback_cache = False  # it hurts small appends, and keep_cache already gives reuse

    def __init__(self, lower: Path, upper: Path, metadir: Path, workdir: Path | None = None) -> None:
        super().__init__(MergedTree(lower, upper, metadir, workdir))
        # Set by the server: run a notification to the kernel outside the handler (it may block).
        self.notify: Callable[[Callable[[], None]], None] | None = None

    def external_changes(self, paths: list[str]) -> Callable[[], None]:
        """The upper layer's entries at ``paths`` were changed by another writer (the pure view, while no
        command ran): re-resolve them now; returns what drops the kernel's caches of them, to be run outside
        the request loop (a notification may wait for a lock a request holds)."""
        entries, attrs = self.tree.external(paths)

        def notify() -> None:
            for ino, name in entries:
                with contextlib.suppress(OSError):  # nothing cached under that name
                    pyfuse3.invalidate_entry(ino, os.fsencode(name))
            for ino in attrs:
                with contextlib.suppress(OSError):
                    pyfuse3.invalidate_inode(ino, True)

        return notify

    # -- helpers -------------------------------------------------------------------------------------
    def _stat(self, node: Node) -> os.stat_result:
        if node.parent is None and node is not self.tree.root:  # unlinked but still open
            for fd in node.fds:
                return os.fstat(fd)
            raise fuse_error(errno.ENOENT)
        return os.lstat(self.tree.backing(node))

    def _child(self, parent_ino: int, name: bytes) -> tuple[Node, os.stat_result]:
        hit = self.tree.child(self.tree.get(parent_ino), os.fsdecode(name))
        if hit is None:
            raise fuse_error(errno.ENOENT)
        return hit

    def _entry(self, node: Node) -> pyfuse3.EntryAttributes:
        node.lookups += 1
        return entry_attributes(node, os.lstat(self.tree.upath(node)))

    def _own(self, path: str, ctx: pyfuse3.RequestContext) -> None:
        if ctx.uid != os.geteuid() or ctx.gid != os.getegid():
            os.chown(path, ctx.uid, ctx.gid, follow_symlinks=False)

    # -- lookup and attributes -----------------------------------------------------------------------
    def lookup(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        hit = self.tree.child(self.tree.get(parent_inode), os.fsdecode(name))
        if hit is None:  # a cached negative entry: the kernel drops it when we create the name
            a = pyfuse3.EntryAttributes()
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

    def getattr(self, inode: int, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        node = self.tree.get(inode)
        return entry_attributes(node, self._stat(node))

    def setattr(self, inode: int, attr: pyfuse3.EntryAttributes, fields: pyfuse3.SetattrFields,
                fh: int | None, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        node = self.tree.get(inode)
        target: int | str
        if node.parent is None and node is not self.tree.root:
            if fh is None and not node.fds:
                raise fuse_error(errno.ENOENT)
            target = fh if fh is not None else next(iter(node.fds))
        else:
            if not node.upper:
                self.tree.copy_up(node, data=not (fields.update_size and attr.st_size == 0))
            self.tree.touch(node)
            target = fh if (fh is not None and fields.update_size) else self.tree.upath(node)
        is_link = isinstance(target, str) and stat_mod.S_ISLNK(os.lstat(target).st_mode)
        if fields.update_size:
            os.truncate(target, attr.st_size)
        if fields.update_mode and not is_link:
            os.chmod(target, stat_mod.S_IMODE(attr.st_mode))
        if fields.update_uid or fields.update_gid:
            os.chown(target, attr.st_uid if fields.update_uid else -1,
                     attr.st_gid if fields.update_gid else -1, follow_symlinks=isinstance(target, int))
        if fields.update_atime or fields.update_mtime:
            st = os.stat(target) if isinstance(target, int) else os.lstat(target)
            times = (attr.st_atime_ns if fields.update_atime else st.st_atime_ns,
                     attr.st_mtime_ns if fields.update_mtime else st.st_mtime_ns)
            if isinstance(target, int):
                os.utime(target, ns=times)
            else:
                os.utime(target, ns=times, follow_symlinks=False)
        st = os.fstat(target) if isinstance(target, int) else os.lstat(target)
        return entry_attributes(node, st)

    def readlink(self, inode: int, ctx: pyfuse3.RequestContext) -> bytes:
        return os.readlink(os.fsencode(self.tree.backing(self.tree.get(inode))))

    def access(self, inode: int, mode: int, ctx: pyfuse3.RequestContext) -> bool:
        return True  # default_permissions: the kernel checks mode bits itself

    def statfs(self, ctx: pyfuse3.RequestContext) -> pyfuse3.StatvfsData:
        sv = os.statvfs(self.tree.upper_s)
        out = pyfuse3.StatvfsData()
        for f in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree",
                  "f_favail", "f_namemax"):
            setattr(out, f, getattr(sv, f))
        return out

    # -- names ---------------------------------------------------------------------------------------
    def mkdir(self, parent_inode: int, name: bytes, mode: int,
              ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        parent, sname = self.tree.get(parent_inode), os.fsdecode(name)
        if self.tree.child(parent, sname) is not None:
            raise fuse_error(errno.EEXIST)
        path, replaces = self.tree.prepare_new(parent, sname)
        os.mkdir(path, mode & ~ctx.umask)
        if replaces:
            layer.make_opaque(Path(path))
        self._own(path, ctx)
        return self._entry(self.tree.new_node(parent, sname, is_dir=True, replaces_lower=replaces))

    def rmdir(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        node, st = self._child(parent_inode, name)
        if not stat_mod.S_ISDIR(st.st_mode):
            raise fuse_error(errno.ENOTDIR)
        if not self.tree.is_empty(node):
            raise fuse_error(errno.ENOTEMPTY)
        self.tree.remove(node)

    def unlink(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        node, st = self._child(parent_inode, name)
        if stat_mod.S_ISDIR(st.st_mode):
            raise fuse_error(errno.EISDIR)
        self.tree.remove(node)

    def symlink(self, parent_inode: int, name: bytes, target: bytes,
                ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        parent, sname = self.tree.get(parent_inode), os.fsdecode(name)
        if self.tree.child(parent, sname) is not None:
            raise fuse_error(errno.EEXIST)
        path, replaces = self.tree.prepare_new(parent, sname)
        os.symlink(target, path)
        self._own(path, ctx)
        return self._entry(self.tree.new_node(parent, sname, is_dir=False, replaces_lower=replaces))

    def mknod(self, parent_inode: int, name: bytes, mode: int, rdev: int,
              ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        parent, sname = self.tree.get(parent_inode), os.fsdecode(name)
        if self.tree.child(parent, sname) is not None:
            raise fuse_error(errno.EEXIST)
        if stat_mod.S_ISCHR(mode) and rdev == 0:
            raise fuse_error(errno.EPERM)  # a 0/0 device is a whiteout in the layer format
        path, replaces = self.tree.prepare_new(parent, sname)
        os.mknod(path, mode & ~ctx.umask, rdev)
        self._own(path, ctx)
        return self._entry(self.tree.new_node(parent, sname, is_dir=False, replaces_lower=replaces))

    def link(self, inode: int, new_parent_inode: int, new_name: bytes,
             ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        node = self.tree.get(inode)
        parent, sname = self.tree.get(new_parent_inode), os.fsdecode(new_name)
        if node.is_dir:
            raise fuse_error(errno.EPERM)
        if self.tree.child(parent, sname) is not None:
            raise fuse_error(errno.EEXIST)
        self.tree.copy_up(node)
        path, replaces = self.tree.prepare_new(parent, sname)
        os.link(self.tree.upath(node), path, follow_symlinks=False)
        if self.notify is not None:  # the kernel caches the old name's attributes (nlink 1): drop them
            # Before replying, not from a thread later: a read through the old name right after a write
            # through the new one raced the invalidation and saw the old size. Invalidating attributes only
            # takes no lock the kernel may hold for this request (pages would), so it is safe inline.
            with contextlib.suppress(OSError):
                pyfuse3.invalidate_inode(node.ino, True)
        # The new name is its own inode here: hard links share data in the upper layer, not inode numbers.
        return self._entry(self.tree.new_node(parent, sname, is_dir=False, replaces_lower=replaces))

    def rename(self, parent_inode_old: int, name_old: bytes, parent_inode_new: int, name_new: bytes,
               flags: int, ctx: pyfuse3.RequestContext) -> None:
        if flags & pyfuse3.RENAME_EXCHANGE:
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
            if flags & pyfuse3.RENAME_NOREPLACE:
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
        p = newp
        while p is not None:  # no moving a directory into itself
            if p is node:
                raise fuse_error(errno.EINVAL)
            p = p.parent
        tree.copy_up(node)
        tree.touch(node)
        new_path, dest_lower = tree.prepare_new(newp, nname)
        if dst is not None and dst[0].upper and dst[0].is_dir:
            shutil.rmtree(tree.upath(dst[0]))
        old_parent = node.parent
        assert old_parent is not None
        os.rename(tree.upath(node), new_path)
        if node.lower:  # the lower entry at the old name would show through again
            layer.make_whiteout(Path(tree.upath(old_parent)), node.name)
        if src_dir and dest_lower:
            layer.make_opaque(Path(new_path))
        tree.move(node, newp, nname, lower_at_dest=dest_lower)

    # -- files ---------------------------------------------------------------------------------------
    def open(self, inode: int, flags: int, ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        node = self.tree.get(inode)
        flags &= ~_OPEN_STRIP
        writes = (flags & os.O_ACCMODE) != os.O_RDONLY or flags & os.O_TRUNC
        if node.parent is None and node is not self.tree.root:
            raise fuse_error(errno.ENOENT)
        if writes:
            if not node.upper:
                self.tree.copy_up(node, data=not flags & os.O_TRUNC)
            self.tree.touch(node)
            return self._fh(node, os.open(self.tree.upath(node), flags))
        if not node.upper:
            fd = os.open(self.tree.lpath(node), flags)
            st = os.fstat(fd)
            if stat_mod.S_ISREG(st.st_mode):
                self.tree.note_read(node, st)
            return self._fh(node, fd, st)
        return self._fh(node, os.open(self.tree.upath(node), flags))

    def create(self, parent_inode: int, name: bytes, mode: int, flags: int,
               ctx: pyfuse3.RequestContext) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        parent, sname = self.tree.get(parent_inode), os.fsdecode(name)
        if self.tree.child(parent, sname) is not None:
            raise fuse_error(errno.EEXIST)
        path, replaces = self.tree.prepare_new(parent, sname)
        fd = os.open(path, (flags & ~_OPEN_STRIP) | os.O_CREAT | os.O_EXCL, mode & ~ctx.umask)
        self._own(path, ctx)
        node = self.tree.new_node(parent, sname, is_dir=False, replaces_lower=replaces)
        attrs = self._entry(node)
        return self._fh(node, fd), attrs

    # -- xattrs (passthrough; the overlay's own markers are hidden) -----------------------------------
    def getxattr(self, inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> bytes:
        if name.startswith(_HIDDEN_XATTR):
            raise fuse_error(pyfuse3.ENOATTR)
        try:
            return os.getxattr(self.tree.backing(self.tree.get(inode)), name, follow_symlinks=False)
        except OSError as e:
            raise fuse_error(pyfuse3.ENOATTR if e.errno == errno.ENODATA else e.errno or errno.EIO) from None

    def listxattr(self, inode: int, ctx: pyfuse3.RequestContext) -> Sequence[bytes]:
        names = os.listxattr(self.tree.backing(self.tree.get(inode)), follow_symlinks=False)
        return [os.fsencode(n) for n in names if not os.fsencode(n).startswith(_HIDDEN_XATTR)]

    def setxattr(self, inode: int, name: bytes, value: bytes, ctx: pyfuse3.RequestContext) -> None:
        if name.startswith(_HIDDEN_XATTR):
            raise fuse_error(errno.EPERM)
        node = self.tree.get(inode)
        self.tree.copy_up(node)
        self.tree.touch(node)
        os.setxattr(self.tree.upath(node), name, value, follow_symlinks=False)

    def removexattr(self, inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        if name.startswith(_HIDDEN_XATTR):
            raise fuse_error(pyfuse3.ENOATTR)
        node = self.tree.get(inode)
        self.tree.copy_up(node)
        self.tree.touch(node)
        os.removexattr(self.tree.upath(node), name, follow_symlinks=False)


for _name in _HANDLERS:
    setattr(OverlayOps, _name, guarded(getattr(OverlayOps, _name)))
