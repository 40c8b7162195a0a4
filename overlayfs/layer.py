"""The on-disk layer format shared by every backend (see docs/overlay.md).

An overlay is a directory ``base`` holding ``upper/`` (new and modified files, whiteouts, opaque markers),
``work/`` (kernel overlayfs's workdir, same filesystem as upper) and ``meta/`` (the conflict bases and the
read set as append-only JSONL, so that a FUSE server in another process can add to them). A bounded overlay
keeps ``upper/`` and ``work/`` on a private tmpfs instead (:mod:`overlayfs.bounded`).

The upper layer uses the format of kernel overlayfs; no file name is reserved (a user may create
``.wh.foo`` or ``.wh..wh..opq``, and it is a file like any other):
- a whiteout (deleted lower entry) is a 0/0 character device named like the entry (anyone may make one
  since Linux 5.8), or, where mknod is refused, an empty regular file named like the entry carrying the
  xattr ``trusted.overlay.whiteout`` (root) or ``user.overlay.whiteout`` (a normal user);
- an opaque directory (a directory that replaced a lower one: lower entries under it are hidden) carries the
  xattr ``trusted.overlay.opaque=y`` (root) or ``user.overlay.opaque=y`` (a normal user, ``userxattr``).
Root reads only the ``trusted.`` markers: a ``user.overlay.*`` xattr in a layer root made is one a command
set (fuse-overlayfs passes them through), not a marker. fuse-overlayfs's own extra markers (a
``.wh..wh..opq`` file and a ``.wh..opq`` whiteout in an opaque directory, ``user.fuseoverlayfs.opaque``)
are rewritten into this format when its mount closes (:func:`adopt_fuse_overlayfs`); it refuses names
starting with ``.wh.`` itself, so whatever else such a layer holds under that prefix is a user's file.

A marker is trusted only from the layer's own writer. Kernel overlayfs and our FUSE server refuse a
command's ``setxattr`` of their private ``user.overlay.*``/``trusted.overlay.*`` names; fuse-overlayfs passes
``user.overlay.*`` through to the upper layer, where a normal user's reader would take it for a whiteout or
an opaque directory (and promotion would delete real files the command still saw). So this process records
each ``user.overlay.*`` marker it makes (:data:`_MADE`, by device and inode), and when a fuse-overlayfs
mount closes every ``user.overlay.whiteout``/``opaque`` it did not make is removed (fuse-overlayfs itself
writes neither: its whiteouts are 0/0 devices and its opaque xattr is ``user.fuseoverlayfs.opaque``). A
``trusted.*`` name needs CAP_SYS_ADMIN in the initial user namespace, which no sandboxed command holds.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat as stat_mod
from dataclasses import dataclass
from pathlib import Path

# Where the overlay's markers live: root reads and writes the trusted namespace only; a normal user,
# who cannot set trusted xattrs, uses the user namespace (as kernel overlayfs does with ``userxattr``).
WRITE_NAMESPACES = ("trusted.overlay.",) if os.geteuid() == 0 else ("trusted.overlay.", "user.overlay.")
READ_NAMESPACES = WRITE_NAMESPACES
# fuse-overlayfs's own markers, rewritten by adopt_fuse_overlayfs (names in no other role).
WH_PREFIX = ".wh."
OPAQUE_FILE = ".wh..wh..opq"
FUSE_OVERLAYFS_OPQ = ".wh..opq"
FUSE_OVERLAYFS_XATTR = "user.fuseoverlayfs.opaque"
BASES_FILE = "bases.jsonl"
READS_FILE = "reads.jsonl"
# Made in meta/ by the FUSE server whenever the upper layer's filesystem refuses a write or create as full
# (ENOSPC, EDQUOT): the sandbox's runner then knows the command hit the bound, whatever it did after.
REFUSED_FILE = "refused"
# The user.overlay markers this process made, as (st_dev, st_ino, what): the record that tells them from
# the lookalikes a command set through fuse-overlayfs (see the module docstring).
_MADE: set[tuple[int, int, str]] = set()
USER_NS = "user.overlay."
# Files up to this size get a content hash in their identity; larger ones rely on size/mtime_ns/inode.
HASH_LIMIT = 1 << 20


@dataclass(frozen=True)
class Identity:
    """What a lower file looked like when the overlay first read or copied it: the base for conflicts."""

    path: str  # relative POSIX path inside the project
    exists: bool
    kind: str = ""  # "file" | "dir" | "symlink" | "other" | "" when absent
    size: int = 0
    mtime_ns: int = 0
    ino: int = 0
    sha256: str | None = None

    @classmethod
    def of(cls, lower: Path, rel: str) -> Identity:
        p = lower / rel
        try:
            st = os.lstat(p)
        except (FileNotFoundError, NotADirectoryError):  # an ancestor that is a file: absent too
            return cls(path=rel, exists=False)
        if stat_mod.S_ISREG(st.st_mode):
            kind = "file"
        elif stat_mod.S_ISDIR(st.st_mode):
            kind = "dir"
        elif stat_mod.S_ISLNK(st.st_mode):
            kind = "symlink"
        else:
            kind = "other"
        digest = None
        if kind == "file" and st.st_size <= HASH_LIMIT:
            digest = hashlib.sha256(p.read_bytes()).hexdigest()
        elif kind == "symlink":
            digest = hashlib.sha256(os.readlink(p).encode("utf-8", "surrogateescape")).hexdigest()
        return cls(rel, True, kind, st.st_size, st.st_mtime_ns, st.st_ino, digest)

    def matches(self, other: Identity) -> bool:
        """Same file as far as conflict detection goes (content hash wins when both have one)."""
        if self.exists != other.exists:
            return False
        if not self.exists:
            return True
        if self.kind != other.kind:
            return False
        if self.sha256 is not None and other.sha256 is not None:
            return self.sha256 == other.sha256
        return (self.size, self.mtime_ns, self.ino) == (other.size, other.mtime_ns, other.ino)


def listing_digest(directory: Path) -> str | None:
    """A hash of a directory's sorted entry names (None if it is not a directory): the identity of a
    listing, so that a read set can say "the speculation listed this directory"."""
    try:
        names = sorted(os.listdir(os.fsencode(directory)))
    except (FileNotFoundError, NotADirectoryError):
        return None
    return hashlib.sha256(b"\0".join(names)).hexdigest()


def identity_line(ident: Identity) -> bytes:
    """One JSONL record of ``ident`` (what :func:`load_identities` reads back)."""
    # vars(), not asdict(): asdict's deep copy cost 60 µs a record, most of a first read through FUSE.
    return (json.dumps(vars(ident), ensure_ascii=False) + "\n").encode("utf-8", "surrogateescape")


def _append(metadir: Path, name: str, ident: Identity) -> None:
    # One write() of a line under O_APPEND is atomic enough for concurrent appenders on a local fs.
    line = identity_line(ident)
    fd = os.open(metadir / name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        if os.write(fd, line) != len(line):  # a full disk took part of it: the operation fails (no retry,
            # which could interleave with another appender); readers skip the torn record
            raise OSError(
                errno.ENOSPC, "the overlay's record could not be written whole", str(metadir / name)
            )
    finally:
        os.close(fd)


def record_base(metadir: Path, ident: Identity) -> None:
    """Record the lower identity of a path at copy-up (first record per path wins when loading)."""
    _append(metadir, BASES_FILE, ident)


def record_read(metadir: Path, ident: Identity) -> None:
    """Record the lower identity of a path the speculation read (first record per path wins)."""
    _append(metadir, READS_FILE, ident)


def load_identities(metadir: Path, name: str) -> dict[str, Identity]:
    out: dict[str, Identity] = {}
    try:
        data = (metadir / name).read_bytes().decode("utf-8", "surrogateescape")
    except FileNotFoundError:
        return out
    for line in data.splitlines():
        d = _record(line) if line.strip() else None
        if d is not None:
            out.setdefault(d["path"], Identity(**d))
    return out


def _record(line: str) -> dict | None:
    try:
        return json.loads(line)
    except ValueError:
        # A record torn by a full disk (its operation failed and recorded nothing), with the next whole
        # record appended right after it on the same line.
        i = line.rfind('{"path"', 1)
        return _record(line[i:]) if i > 0 else None


def _marker(path: str | os.PathLike[str], what: str) -> bool:
    """Whether ``path`` carries the overlay xattr ``what`` ("opaque", "whiteout") in a namespace we trust."""
    for ns in READ_NAMESPACES:
        try:
            if os.getxattr(path, f"{ns}{what}", follow_symlinks=False) == b"y":
                return True
        except OSError:
            pass
    return False


def is_whiteout_at(path: str, st: os.stat_result) -> bool:
    """Whether the upper entry at ``path`` (whose lstat is ``st``) is a whiteout, in either form."""
    if stat_mod.S_ISCHR(st.st_mode):
        return st.st_rdev == 0
    return stat_mod.S_ISREG(st.st_mode) and st.st_size == 0 and _marker(path, "whiteout")


def make_whiteout(upper_dir: Path, name: str) -> None:
    """Hide lower entry ``name`` (nothing may stand at ``name`` in ``upper_dir``): a 0/0 character device,
    or an empty file with the whiteout xattr where mknod is refused."""
    target = upper_dir / name
    try:
        os.mknod(target, stat_mod.S_IFCHR | 0o000, os.makedev(0, 0))
        return
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EINVAL):
            raise
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o000)
    os.close(fd)
    try:
        _set_marker(target, "whiteout")
    except OSError:
        os.unlink(target)
        raise


def remove_whiteout(upper_dir: Path, name: str) -> None:
    """Remove a whiteout for ``name`` (either form) before creating a new entry there."""
    p = upper_dir / name
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return
    if is_whiteout_at(os.fspath(p), st):
        _MADE.discard((st.st_dev, st.st_ino, "whiteout"))
        os.unlink(p)


def is_opaque(upper_dir: str | os.PathLike[str]) -> bool:
    return _marker(upper_dir, "opaque")


def make_opaque(upper_dir: Path) -> None:
    """Mark an upper directory opaque: lower entries beneath it are hidden."""
    _set_marker(upper_dir, "opaque")


def _set_marker(path: Path, what: str) -> None:
    err: OSError | None = None
    for ns in WRITE_NAMESPACES:
        try:
            os.setxattr(path, f"{ns}{what}", b"y", follow_symlinks=False)
            if ns == USER_NS:
                st = os.lstat(path)
                _MADE.add((st.st_dev, st.st_ino, what))
            return
        except OSError as e:
            err = e
    raise OSError(
        err.errno if err else errno.EOPNOTSUPP,
        f"the upper layer's filesystem holds no overlay "
        f"xattr ({', '.join(n + what for n in WRITE_NAMESPACES)}): it cannot hold the layer format",
        os.fspath(path),
    )


def fuse_overlayfs_markers(upper: str) -> bool:
    """Whether :func:`adopt_fuse_overlayfs` would rewrite anything in ``upper`` (it only reads): its own
    markers, or a ``user.overlay.*`` marker a command set (the mount must then close, and the marker go,
    before anyone reads the layer)."""
    return _adopt(upper, rewrite=False)


def adopt_fuse_overlayfs(upper: str) -> None:
    """Rewrite what fuse-overlayfs leaves in an upper layer beside the shared format: in each opaque
    directory a ``.wh..wh..opq`` file and a ``.wh..opq`` whiteout (dropped), and, unprivileged, the xattr
    ``user.fuseoverlayfs.opaque`` (made ``user.overlay.opaque``). Only the pair marks a directory, and no
    command can make the pair (fuse-overlayfs refuses ``.wh.`` names, and mknod of a 0/0 device is denied
    in the sandbox), so a user's own ``.wh..wh..opq`` file stays. A ``user.overlay.whiteout`` or ``opaque``
    xattr this process did not make was set by a command: it is removed (the command saw a plain file or
    directory, and that is what lands)."""
    _adopt(upper, rewrite=True)


def _adopt(upper: str, *, rewrite: bool) -> bool:
    found = False
    stack = [upper]
    while stack:
        d = stack.pop()
        try:
            it = os.scandir(d)
        except OSError:
            continue
        with it:
            names = {}
            for e in it:
                names[e.name] = e
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
                if _forged(e.path, e.stat(follow_symlinks=False), rewrite=rewrite) and not rewrite:
                    return True
        if d == upper and _forged(d, os.lstat(d), rewrite=rewrite) and not rewrite:
            return True
        if OPAQUE_FILE not in names or FUSE_OVERLAYFS_OPQ not in names:
            continue
        foreign = _fuse_overlayfs_opaque(d)
        if not (foreign or is_opaque(d)):
            continue
        f, w = (
            names[OPAQUE_FILE].stat(follow_symlinks=False),
            names[FUSE_OVERLAYFS_OPQ].stat(follow_symlinks=False),
        )
        if not (
            stat_mod.S_ISREG(f.st_mode) and f.st_size == 0 and stat_mod.S_ISCHR(w.st_mode) and w.st_rdev == 0
        ):
            continue
        found = True
        if not rewrite:
            return True
        if foreign:
            make_opaque(Path(d))
        os.unlink(names[OPAQUE_FILE].path)
        os.unlink(names[FUSE_OVERLAYFS_OPQ].path)
    return found


def _forged(path: str, st: os.stat_result, *, rewrite: bool) -> bool:
    """Whether ``path`` (lstat ``st``) carries a ``user.overlay.*`` marker this process did not make;
    ``rewrite``: remove it. Only where a reader takes one (an empty file's whiteout, a directory's opaque):
    one getxattr each, on the walk adopt makes anyway."""
    if USER_NS not in READ_NAMESPACES:  # root reads trusted markers only: a user xattr is the user's
        return False
    if stat_mod.S_ISDIR(st.st_mode):
        what = "opaque"
    elif stat_mod.S_ISREG(st.st_mode) and st.st_size == 0:
        what = "whiteout"
    else:
        return False
    if (st.st_dev, st.st_ino, what) in _MADE:
        return False
    try:
        os.getxattr(path, USER_NS + what, follow_symlinks=False)
    except OSError:
        return False
    if rewrite:
        os.removexattr(path, USER_NS + what, follow_symlinks=False)
    return True


def _fuse_overlayfs_opaque(d: str) -> bool:
    try:
        return os.getxattr(d, FUSE_OVERLAYFS_XATTR, follow_symlinks=False) == b"y"
    except OSError:
        return False
