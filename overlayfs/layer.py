"""The on-disk layer format shared by every backend (see docs/overlay.md).

An overlay is a directory ``base`` holding ``upper/`` (new and modified files, whiteouts, opaque markers),
``work/`` (kernel overlayfs's workdir, same filesystem as upper) and ``meta/`` (the conflict bases and the
read set as append-only JSONL, so that a FUSE server in another process can add to them).

The upper layer uses the format of kernel overlayfs and fuse-overlayfs:
- a whiteout (deleted lower entry) is a 0/0 character device named like the entry, or, where mknod is not
  allowed, an empty file named ``.wh.<name>``;
- an opaque directory (a directory that replaced a lower one: lower entries under it are hidden) carries the
  xattr ``trusted.overlay.opaque=y`` (root) or ``user.overlay.opaque=y`` (unprivileged, ``userxattr``), or,
  where xattrs are not allowed, holds an empty file ``.wh..wh..opq``.
Readers accept every form; writers use the first form the process is allowed to create.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat as stat_mod
from dataclasses import asdict, dataclass
from pathlib import Path

WH_PREFIX = ".wh."
OPAQUE_FILE = ".wh..wh..opq"
OPAQUE_XATTRS = ("trusted.overlay.opaque", "user.overlay.opaque")
BASES_FILE = "bases.jsonl"
READS_FILE = "reads.jsonl"
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


def _append(metadir: Path, name: str, ident: Identity) -> None:
    # One write() of a line under O_APPEND is atomic enough for concurrent appenders on a local fs.
    line = (json.dumps(asdict(ident), ensure_ascii=False) + "\n").encode("utf-8", "surrogateescape")
    fd = os.open(metadir / name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        if os.write(fd, line) != len(line):  # a full disk took part of it: the operation fails (no retry,
            # which could interleave with another appender); readers skip the torn record
            raise OSError(errno.ENOSPC, "the overlay's record could not be written whole", str(metadir / name))
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


def _record(line: str) -> dict | None:  # type: ignore[type-arg]
    try:
        return json.loads(line)  # type: ignore[no-any-return]
    except ValueError:
        # A record torn by a full disk (its operation failed and recorded nothing), with the next whole
        # record appended right after it on the same line.
        i = line.rfind('{"path"', 1)
        return _record(line[i:]) if i > 0 else None


def is_whiteout(upper_dir: Path, name: str) -> bool:
    """True if ``name`` in ``upper_dir`` is hidden by a whiteout (either form)."""
    try:
        st = os.lstat(upper_dir / name)
        if stat_mod.S_ISCHR(st.st_mode) and st.st_rdev == 0:
            return True
    except FileNotFoundError:
        pass
    return os.path.lexists(upper_dir / (WH_PREFIX + name))


def is_whiteout_entry(upper_dir: Path, name: str) -> bool:
    """True if the directory entry ``name`` itself is a whiteout marker (not a real merged entry)."""
    if name.startswith(WH_PREFIX):
        return True
    try:
        st = os.lstat(upper_dir / name)
    except FileNotFoundError:
        return False
    return stat_mod.S_ISCHR(st.st_mode) and st.st_rdev == 0


def make_whiteout(upper_dir: Path, name: str) -> None:
    """Hide lower entry ``name``: a 0/0 char device where mknod is allowed, else ``.wh.<name>``."""
    target = upper_dir / name
    try:
        os.mknod(target, stat_mod.S_IFCHR | 0o000, os.makedev(0, 0))
    except PermissionError:
        (upper_dir / (WH_PREFIX + name)).touch()
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EINVAL):
            raise
        (upper_dir / (WH_PREFIX + name)).touch()


def remove_whiteout(upper_dir: Path, name: str) -> None:
    """Remove a whiteout for ``name`` (either form) before creating a new entry there."""
    try:
        st = os.lstat(upper_dir / name)
        if stat_mod.S_ISCHR(st.st_mode) and st.st_rdev == 0:
            os.unlink(upper_dir / name)
    except FileNotFoundError:
        pass
    try:
        os.unlink(upper_dir / (WH_PREFIX + name))
    except FileNotFoundError:
        pass


def is_opaque(upper_dir: str | os.PathLike[str]) -> bool:
    for attr in OPAQUE_XATTRS:
        try:
            if os.getxattr(upper_dir, attr, follow_symlinks=False) == b"y":
                return True
        except OSError:
            pass
    return os.path.lexists(os.path.join(upper_dir, OPAQUE_FILE))


def make_opaque(upper_dir: Path) -> None:
    """Mark an upper directory opaque: lower entries beneath it are hidden."""
    for attr in OPAQUE_XATTRS:
        try:
            os.setxattr(upper_dir, attr, b"y", follow_symlinks=False)
            return
        except OSError:
            continue
    (upper_dir / OPAQUE_FILE).touch()
